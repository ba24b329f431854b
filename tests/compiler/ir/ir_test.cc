// IR constructors, visitor/mutator helpers and the printer.
#include <gtest/gtest.h>

#include "compiler/ir/ir.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/visitor.h"

namespace tunefarm::ir {
namespace {

TEST(Ir, ConstructorsFoldConstants) {
  EXPECT_EQ(*as_const_int(add(int_imm(2), int_imm(3))), 5);
  EXPECT_EQ(*as_const_int(mul(int_imm(4), int_imm(-2))), -8);
  EXPECT_EQ(*as_const_int(min(int_imm(4), int_imm(9))), 4);
  Var x = make_var("x");
  EXPECT_EQ(add(x, int_imm(0)), Expr(x));
  EXPECT_EQ(mul(x, int_imm(1)), Expr(x));
  EXPECT_EQ(to_string(select(bool_imm(true), x, int_imm(1))), "x");
}

TEST(Ir, BlockFlattensAndDropsNulls) {
  Buffer b = make_buffer("b", Type::f32(), {4});
  Stmt s1 = store(b, float_imm(1), {int_imm(0)});
  Stmt s2 = store(b, float_imm(2), {int_imm(1)});
  Stmt nested = block({s1, nullptr, block({s2, s1})});
  ASSERT_TRUE(nested->as<Block>());
  EXPECT_EQ(nested->as<Block>()->stmts.size(), 3u);
  EXPECT_EQ(block({s1}), s1);
}

TEST(Ir, PrinterShowsLoopsAnnotationsAndAllocations) {
  Var i = make_var("i");
  Buffer out = make_buffer("out", Type::f32(), {16});
  Buffer tmp = make_buffer("tmp", Type::f32(), {16}, MemScope::kLocal);
  Stmt body = store(out, load(tmp, {i}), {i});
  Stmt s = allocate(tmp, for_loop(i, int_imm(0), int_imm(16), ForKind::kVectorized, body));
  std::string text = to_string(s);
  EXPECT_NE(text.find("allocate tmp[float32 * 16] in local"), std::string::npos) << text;
  EXPECT_NE(text.find("for (i, 0, 16) vectorized {"), std::string::npos) << text;
  EXPECT_NE(text.find("out[i] = tmp[i]"), std::string::npos) << text;
  EXPECT_EQ(to_string(ramp(int_imm(4), int_imm(1), 8)), "ramp(4, 1, 8)");
}

TEST(Ir, SubstituteEqualAndUses) {
  Var x = make_var("x"), y = make_var("y");
  Expr e = add(mul(x, int_imm(3)), y);
  Expr r = substitute(e, {{x.get(), int_imm(2)}});
  EXPECT_EQ(to_string(r), "(6 + y)");
  EXPECT_TRUE(uses_var(e, x.get()));
  EXPECT_FALSE(uses_var(r, x.get()));
  EXPECT_TRUE(equal(add(x, y), add(x, y)));
  EXPECT_FALSE(equal(add(x, y), add(y, x)));
  EXPECT_FALSE(equal(Expr(make_var("x")), Expr(x)));  // Variables compare by identity.
}

}  // namespace
}  // namespace tunefarm::ir
