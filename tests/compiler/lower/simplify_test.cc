// Simplification with loop-variable ranges.
#include <gtest/gtest.h>

#include "compiler/ir/printer.h"
#include "compiler/lower/simplify.h"

namespace tunefarm::lower {
namespace {

using namespace ir;

TEST(Simplify, CollectsLinearTerms) {
  Var x = make_var("x"), y = make_var("y");
  Expr e = sub(add(add(mul(x, int_imm(4)), y), mul(int_imm(2), x)), add(x, y));
  EXPECT_EQ(to_string(simplify(e)), "(x*5)");
}

TEST(Simplify, DivModOfSplitIndexWithRanges) {
  Var jo = make_var("jo"), ji = make_var("ji");
  RangeMap r = {{jo.get(), {0, 31}}, {ji.get(), {0, 31}}};
  Expr j = add(mul(jo, int_imm(32)), ji);
  EXPECT_EQ(to_string(simplify(div(j, int_imm(32)), r)), "jo");
  EXPECT_EQ(to_string(simplify(mod(j, int_imm(32)), r)), "ji");
  // Without knowing ji < 32 nothing can be said.
  EXPECT_EQ(to_string(simplify(div(j, int_imm(32)))), "(((jo*32) + ji)/32)");
}

// The last index of a split with a tail, divided back by the factor, is the outer index: a
// Winograd tile's last output row, (po*4 + min(4, 10 - po*4) - 1)/4 over po in 0..2, is in tile po
// (the region a stage computed at the tile reads is one tile, not a variable extent).
TEST(Simplify, TheLastIndexOfASplitWithATailDividesBackToItsTile) {
  Var po = make_var("po");
  RangeMap r = {{po.get(), {0, 2}}};
  Expr last = sub(add(mul(po, int_imm(4)), min(int_imm(4), sub(int_imm(10), mul(po, int_imm(4))))), int_imm(1));
  EXPECT_EQ(to_string(simplify(div(last, int_imm(4)), r)), "po");
  // A remainder that may reach the next multiple stays a quotient.
  Var x = make_var("x");
  RangeMap rx = {{po.get(), {0, 2}}, {x.get(), {0, 5}}};
  EXPECT_EQ(to_string(simplify(div(add(mul(po, int_imm(4)), x), int_imm(4)), rx)), "(po + (x/4))");
}

// A fused index split back into its axes and flattened is the fused index again (a softmax's
// heads and rows fused into one parallel loop, read at [f / 128, f % 128, k] of a 128 x 128 row
// block); a remainder of another divisor, or of another variable, stays.
TEST(Simplify, DivAndModOfOneIndexRecombine) {
  Var f = make_var("f"), k = make_var("k"), g = make_var("g");
  Expr flat = add(add(mul(div(f, int_imm(128)), int_imm(16384)), mul(mod(f, int_imm(128)), int_imm(128))), k);
  EXPECT_EQ(to_string(simplify(flat)), "((f*128) + k)");
  Expr other = add(mul(div(f, int_imm(128)), int_imm(16384)), mul(mod(g, int_imm(128)), int_imm(128)));
  EXPECT_EQ(to_string(simplify(other)), "(((f/128)*16384) + ((g % 128)*128))");
  Expr divisor = add(mul(div(f, int_imm(64)), int_imm(16384)), mul(mod(f, int_imm(128)), int_imm(128)));
  EXPECT_EQ(to_string(simplify(divisor)), "(((f/64)*16384) + ((f % 128)*128))");
}

TEST(Simplify, MinMaxAndComparisonsDecidedByRanges) {
  Var o = make_var("o");
  RangeMap r = {{o.get(), {0, 2}}};
  // The inner extent of a split of 100 by 32 in the first three iterations.
  Expr ext = min(int_imm(32), sub(int_imm(100), mul(o, int_imm(32))));
  EXPECT_EQ(to_string(simplify(ext, r)), "32");
  RangeMap last = {{o.get(), {3, 3}}};
  EXPECT_EQ(to_string(simplify(ext, last)), "4");
  EXPECT_EQ(to_string(simplify(lt(o, int_imm(3)), r)), "true");
  EXPECT_EQ(to_string(simplify(lt(o, int_imm(2)), r)), "(o < 2)");
}

TEST(Simplify, LoopsOfOneIterationDisappear) {
  Var i = make_var("i"), j = make_var("j");
  Buffer b = make_buffer("b", Type::f32(), {8});
  Stmt s = for_loop(i, int_imm(0), int_imm(1), ForKind::kSerial,
                    for_loop(j, int_imm(0), int_imm(8), ForKind::kSerial, store(b, float_imm(0), {add(i, j)})));
  EXPECT_EQ(to_string(simplify(s)), "for (j, 0, 8) {\n  b[j] = 0f\n}\n");
  Stmt empty = for_loop(i, int_imm(0), int_imm(0), ForKind::kSerial, store(b, float_imm(0), {i}));
  EXPECT_EQ(to_string(simplify(empty)), "");
}

// A padding tap whose guard became constant: select(false, x, 0) * w is a zero product, the
// accumulation acc = acc + 0 stores what acc holds, and it drops out (and its loop with it).
TEST(Simplify, ZeroProductsAndStoresOfWhatIsThereDropOut) {
  Var k = make_var("k");
  Buffer acc = make_buffer("acc", Type::f32(), {16}), x = make_buffer("x", Type::f32(), {8}),
         w = make_buffer("w", Type::f32(), {128});
  Expr idx = ramp(int_imm(0), int_imm(1), 16);
  Expr tap = broadcast(select(ge(int_imm(-1), int_imm(0)), load(x, {int_imm(0)}), float_imm(0)), 16);
  Stmt update = store(acc, add(load(acc, {idx}), mul(tap, load(w, {ramp(mul(k, int_imm(16)), int_imm(1), 16)}))), {idx});
  EXPECT_EQ(to_string(simplify(for_loop(k, int_imm(0), int_imm(8), ForKind::kSerial, update))), "");
  // A guard that holds keeps the product; a zero elsewhere than a factor or a term keeps its expression.
  Expr live = broadcast(select(ge(int_imm(1), int_imm(0)), load(x, {int_imm(0)}), float_imm(0)), 16);
  Stmt kept = store(acc, add(load(acc, {idx}), mul(live, load(w, {idx}))), {idx});
  EXPECT_EQ(to_string(simplify(kept)), "acc[ramp(0, 1, 16)] = (acc[ramp(0, 1, 16)] + (x16(x[0])*w[ramp(0, 1, 16)]))\n");
  Stmt div_zero = store(acc, binary(BinaryOp::kDiv, load(acc, {idx}), broadcast(float_imm(0), 16)), {idx});
  EXPECT_NE(to_string(simplify(div_zero)), "");
  // A store of another location's value stays.
  Stmt moved = store(acc, load(acc, {ramp(int_imm(1), int_imm(1), 16)}), {idx});
  EXPECT_NE(to_string(simplify(moved)), "");
}

TEST(Simplify, ConstBounds) {
  Var x = make_var("x");
  RangeMap r = {{x.get(), {2, 5}}};
  auto b = const_bounds(add(mul(x, int_imm(3)), int_imm(1)), r);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->lo, 7);
  EXPECT_EQ(b->hi, 16);
  EXPECT_FALSE(const_bounds(add(x, make_var("unknown")), r));
}

}  // namespace
}  // namespace tunefarm::lower
