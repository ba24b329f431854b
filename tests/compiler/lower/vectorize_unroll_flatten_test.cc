// Explicit vectorization, unrolling and storage flattening.
#include <gtest/gtest.h>

#include "compiler/ir/printer.h"
#include "compiler/lower/simplify.h"
#include "compiler/lower/storage_flatten.h"
#include "compiler/lower/unroll.h"
#include "compiler/lower/vectorize.h"

namespace tunefarm::lower {
namespace {

using namespace ir;

TEST(Vectorize, DenseLoopBecomesPowerOfTwoVectorStatements) {
  Var i = make_var("i");
  Buffer a = make_buffer("a", Type::f32(), {24}), c = make_buffer("c", Type::f32(), {24});
  Stmt loop = for_loop(i, int_imm(0), int_imm(24), ForKind::kVectorized,
                       store(c, mul(load(a, {i}), float_imm(2)), {i}));
  EXPECT_EQ(to_string(simplify(vectorize_loops(loop))),
            "c[ramp(0, 1, 16)] = (a[ramp(0, 1, 16)]*x16(2f))\n"
            "c[ramp(16, 1, 8)] = (a[ramp(16, 1, 8)]*x8(2f))\n");
  Stmt odd = for_loop(i, int_imm(0), int_imm(7), ForKind::kVectorized, store(c, load(a, {i}), {i}));
  EXPECT_EQ(to_string(simplify(vectorize_loops(odd))),
            "c[ramp(0, 1, 4)] = a[ramp(0, 1, 4)]\nc[ramp(4, 1, 2)] = a[ramp(4, 1, 2)]\nc[6] = a[6]\n");
}

TEST(Vectorize, VariableExtentIsMaskedToItsBound) {
  Var o = make_var("o"), i = make_var("i");
  Buffer a = make_buffer("a", Type::f32(), {40}), c = make_buffer("c", Type::f32(), {40});
  // The tail of a split of 40 by 16: i < min(16, 40 - 16 o), up to 16 lanes.
  Stmt inner = for_loop(i, int_imm(0), min(int_imm(16), sub(int_imm(40), mul(o, int_imm(16)))), ForKind::kVectorized,
                        store(c, load(a, {add(mul(o, int_imm(16)), i)}), {add(mul(o, int_imm(16)), i)}));
  Stmt s = for_loop(o, int_imm(0), int_imm(3), ForKind::kSerial, inner);
  std::string text = to_string(vectorize_loops(s));
  EXPECT_NE(text.find("c[ramp((o*16), 1, 16)] = (a[ramp((o*16), 1, 16)] if (ramp(0, 1, 16) < x16(min(16, (40 - (o*16))))))"
                      " if (ramp(0, 1, 16) < x16(min(16, (40 - (o*16)))))"),
            std::string::npos)
      << text;
}

TEST(Vectorize, StridedAccessStaysARampWithItsStride) {
  Var i = make_var("i");
  Buffer a = make_buffer("a", Type::f32(), {32}), c = make_buffer("c", Type::f32(), {8});
  Stmt loop = for_loop(i, int_imm(0), int_imm(8), ForKind::kVectorized, store(c, load(a, {mul(i, int_imm(4))}), {i}));
  EXPECT_EQ(to_string(simplify(vectorize_loops(loop))), "c[ramp(0, 1, 8)] = a[ramp(0, 4, 8)]\n");
}

TEST(Vectorize, LoopWithInnerLoopStaysScalar) {
  Var i = make_var("i"), j = make_var("j");
  Buffer c = make_buffer("c", Type::f32(), {16});
  Stmt loop = for_loop(i, int_imm(0), int_imm(4), ForKind::kVectorized,
                       for_loop(j, int_imm(0), int_imm(4), ForKind::kSerial, store(c, float_imm(0), {add(mul(i, int_imm(4)), j)})));
  Stmt out = vectorize_loops(loop);
  ASSERT_TRUE(out->as<For>());
  EXPECT_EQ(out->as<For>()->for_kind, ForKind::kSerial);
}

TEST(Unroll, ConstantLoopIsReplicated) {
  Var i = make_var("i");
  Buffer c = make_buffer("c", Type::f32(), {3});
  Stmt loop = for_loop(i, int_imm(0), int_imm(3), ForKind::kUnrolled, store(c, float_imm(1), {i}));
  EXPECT_EQ(to_string(simplify(unroll_loops(loop))), "c[0] = 1f\nc[1] = 1f\nc[2] = 1f\n");
  Stmt big = for_loop(i, int_imm(0), int_imm(1000), ForKind::kUnrolled, store(c, float_imm(1), {i}));
  EXPECT_EQ(unroll_loops(big)->as<For>()->for_kind, ForKind::kSerial);
}

TEST(StorageFlatten, RowMajorOffsets) {
  Var i = make_var("i"), j = make_var("j");
  Buffer a = make_buffer("a", Type::f32(), {4, 5, 6});
  Stmt s = store(a, load(a, {i, j, int_imm(2)}), {int_imm(1), i, j});
  std::string text = to_string(simplify(storage_flatten(s)));
  EXPECT_NE(text.find("a[(((i*6) + j) + 30)]"), std::string::npos) << text;
  EXPECT_NE(text.find("a[(((i*30) + (j*6)) + 2)]"), std::string::npos) << text;
}

}  // namespace
}  // namespace tunefarm::lower
