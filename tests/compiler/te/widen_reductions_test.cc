// The reference kernel's precision transform: sums accumulate in the wide type, readers see the
// old type, max reductions and placeholders are left alone, the output keeps its name and type.
#include <gtest/gtest.h>

#include "compiler/ir/printer.h"
#include "compiler/te/widen_reductions.h"

namespace tunefarm::te {
namespace {

using ir::Type;
using ir::Var;

TEST(WidenReductions, SumAccumulatesWideAndTheOutputConvertsBack) {
  Tensor a = placeholder("A", {4, 8});
  Tensor b = placeholder("B", {8, 5});
  IterVar k = reduce_axis(8, "k");
  Tensor c = compute("C", {4, 5}, [&](const std::vector<Var>& i) { return sum(a(i[0], k->var) * b(k->var, i[1]), {k}); });
  auto args = widen_reductions({a, b, c}, Type::f64());
  ASSERT_EQ(args.size(), 3u);
  EXPECT_EQ(args[0].op, a.op);
  EXPECT_EQ(args[1].op, b.op);
  const Tensor& out = args[2];
  EXPECT_EQ(out.name(), "C");
  EXPECT_EQ(out.buffer()->dtype, Type::f32());
  ASSERT_EQ(out.op->inputs.size(), 1u);
  const auto& acc = out.op->inputs[0];
  EXPECT_EQ(acc->name, "C_acc");
  EXPECT_EQ(acc->buffer->dtype, Type::f64());
  const auto* red = acc->body->as<ir::Reduce>();
  ASSERT_NE(red, nullptr);
  EXPECT_EQ(red->type, Type::f64());
  EXPECT_NE(ir::to_string(out.op->body).find("float32(C_acc"), std::string::npos) << ir::to_string(out.op->body);
  // The original definition is untouched.
  EXPECT_EQ(c.buffer()->dtype, Type::f32());
  EXPECT_EQ(c.op->body->type, Type::f32());
}

TEST(WidenReductions, AnEpilogueReadsTheAccumulatorInItsOwnTypeAndMaxStaysNarrow) {
  Tensor a = placeholder("A", {3, 6});
  IterVar k = reduce_axis(6, "k");
  IterVar m = reduce_axis(6, "m");
  Tensor s = compute("S", {3}, [&](const std::vector<Var>& i) { return sum(a(i[0], k->var), {k}); });
  Tensor mx = compute("M", {3}, [&](const std::vector<Var>& i) { return max_reduce(a(i[0], m->var), {m}); });
  Tensor out = compute("O", {3}, [&](const std::vector<Var>& i) { return ir::max(s(i[0]) + mx(i[0]), ir::float_imm(0)); });
  auto args = widen_reductions({a, out}, Type::f64());
  const Tensor& o = args[1];
  EXPECT_EQ(o.name(), "O");
  EXPECT_EQ(o.buffer()->dtype, Type::f32());
  ASSERT_EQ(o.op->inputs.size(), 2u);
  for (const auto& in : o.op->inputs) {
    EXPECT_EQ(in->buffer->dtype, in->name == "S" ? Type::f64() : Type::f32()) << in->name;
    EXPECT_NE(in, s.op);
  }
  std::string body = ir::to_string(o.op->body);
  EXPECT_NE(body.find("float32(S["), std::string::npos) << body;
}

}  // namespace
}  // namespace tunefarm::te
