// Tail handling: loops split where a min changes sides, leaving constant extents in each part.
#include <gtest/gtest.h>

#include "compiler/ir/printer.h"
#include "compiler/lower/loop_partition.h"
#include "compiler/lower/unroll.h"

namespace tunefarm::lower {
namespace {

using namespace ir;

TEST(LoopPartition, NonDividingSplitBecomesMainLoopAndTail) {
  Var o = make_var("o"), i = make_var("i");
  Buffer b = make_buffer("b", Type::f32(), {10});
  // for o in [0, 3): for i in [0, min(4, 10 - 4o)): b[4o + i] = 1
  Stmt inner = for_loop(i, int_imm(0), min(int_imm(4), sub(int_imm(10), mul(o, int_imm(4)))), ForKind::kVectorized,
                        store(b, float_imm(1), {add(mul(o, int_imm(4)), i)}));
  Stmt s = for_loop(o, int_imm(0), int_imm(3), ForKind::kSerial, inner);
  std::string text = to_string(loop_partition(s));
  EXPECT_EQ(text,
            "for (o, 0, 2) {\n"
            "  for (i, 0, 4) vectorized {\n"
            "    b[((o*4) + i)] = 1f\n"
            "  }\n"
            "}\n"
            "for (i, 0, 2) vectorized {\n"
            "  b[(i + 8)] = 1f\n"
            "}\n");
}

TEST(LoopPartition, DividingSplitIsLeftAlone) {
  Var o = make_var("o"), i = make_var("i");
  Buffer b = make_buffer("b", Type::f32(), {8});
  Stmt s = for_loop(o, int_imm(0), int_imm(2), ForKind::kSerial,
                    for_loop(i, int_imm(0), int_imm(4), ForKind::kSerial, store(b, float_imm(1), {add(mul(o, int_imm(4)), i)})));
  EXPECT_EQ(loop_partition(s), s);
}

// A convolution's row of taps over a padded input: for p in [0, P): for r in [0, 3) unrolled:
// acc[p] += select(0 <= p + r - 1 < P, x[clamp(p + r - 1)], 0) * w[r].
Stmt padded_rows(int64_t rows, ForKind kind) {
  Var p = make_var("p"), r = make_var("r");
  Buffer acc = make_buffer("acc", Type::f32(), {rows}), x = make_buffer("x", Type::f32(), {rows}),
         w = make_buffer("w", Type::f32(), {3});
  Expr h = sub(add(p, r), int_imm(1));
  Expr inside = logical_and(ge(h, int_imm(0)), lt(h, int_imm(rows)));
  Expr read = select(inside, load(x, {min(max(h, int_imm(0)), int_imm(rows - 1))}), float_imm(0));
  Stmt tap = store(acc, add(load(acc, {p}), mul(read, load(w, {r}))), {p});
  return for_loop(p, int_imm(0), int_imm(rows), kind, for_loop(r, int_imm(0), int_imm(3), ForKind::kUnrolled, tap));
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// On a small map the border rows are peeled: unrolled, their guards are constants, and the taps
// in the padding are not computed at all (2 + 3 + 3 + 3 + 2 of 15); the interior reads unguarded
// and runs first.
TEST(LoopPartition, BorderRowsOfASmallMapArePeeledAndSkipTheirPaddingTaps) {
  std::string text = to_string(simplify(unroll_loops(loop_partition(padded_rows(5, ForKind::kSerial)))));
  EXPECT_EQ(count(text, "select"), 0) << text;
  EXPECT_EQ(count(text, "min("), 0) << text;
  EXPECT_EQ(count(text, "w["), 2 + 3 + 2) << text;
  // The interior first: it reads every weight of the window (a border row, two thirds of them).
  EXPECT_EQ(text.rfind("for (p, 1, 3)", 0), 0u) << text;
}

// A parallel loop is not cut into parts (each border row would run on one thread): its body
// branches to the part of its iteration.
TEST(LoopPartition, AParallelLoopBranchesToItsParts) {
  std::string text = to_string(simplify(unroll_loops(loop_partition(padded_rows(5, ForKind::kParallel)))));
  EXPECT_EQ(count(text, "for (p, 0, 5) parallel"), 1) << text;
  EXPECT_EQ(count(text, "for ("), 1) << text;
  EXPECT_EQ(count(text, "select"), 0) << text;
  EXPECT_EQ(count(text, "w["), 2 + 3 + 2) << text;
}

// On a large map the padding is a few percent of the reads: one loop whose interior reads
// unguarded and whose two border rows keep the guards, two copies of the body rather than one
// per border row.
TEST(LoopPartition, ALargeMapBranchesBetweenItsInteriorAndItsGuardedBorder) {
  std::string text = to_string(simplify(unroll_loops(loop_partition(padded_rows(56, ForKind::kSerial)))));
  EXPECT_EQ(count(text, "for (p, 0, 56)"), 1) << text;
  EXPECT_EQ(count(text, "w["), 3 + 3) << text;
  EXPECT_EQ(count(text, "select"), 2) << text;  // The middle tap is never in the padding.
}

// Guards that depend on a serial inner loop cannot become constants: no peeling, and the
// result still computes every tap under its guard where it is not known to hold.
TEST(LoopPartition, GuardsOnASerialInnerLoopAreNotPeeled) {
  Var p = make_var("p"), r = make_var("r");
  Buffer acc = make_buffer("acc", Type::f32(), {5}), x = make_buffer("x", Type::f32(), {5});
  Expr h = sub(add(p, r), int_imm(1));
  Expr read = select(logical_and(ge(h, int_imm(0)), lt(h, int_imm(5))), load(x, {min(max(h, int_imm(0)), int_imm(4))}), float_imm(0));
  Stmt s = for_loop(p, int_imm(0), int_imm(5), ForKind::kSerial,
                    for_loop(r, int_imm(0), int_imm(3), ForKind::kSerial, store(acc, add(load(acc, {p}), read), {p})));
  std::string text = to_string(simplify(loop_partition(s)));
  EXPECT_EQ(count(text, "for (p, 0, 5)"), 1) << text;
  EXPECT_EQ(count(text, "select"), 1) << text;
}

// A parallel loop fused of 4 channel blocks x 28 rows (ops::plain_schedule) reaches its rows'
// guards through v % 28: every block's rows 1 to 26 read unguarded (before, only the first
// block's, the guards taken for v's own), with v / 28 and v % 28 bound once an iteration.
TEST(LoopPartition, AFusedLoopTakesOutTheGuardsOfEveryOuterIteration) {
  Var v = make_var("v"), r = make_var("r");
  Buffer out = make_buffer("out", Type::f32(), {4 * 28}), x = make_buffer("x", Type::f32(), {4 * 28});
  Expr row = mod(v, int_imm(28)), block = div(v, int_imm(28));
  Expr h = sub(add(row, r), int_imm(1));
  Expr inside = logical_and(ge(h, int_imm(0)), lt(h, int_imm(28)));
  Expr at = add(mul(block, int_imm(28)), min(max(h, int_imm(0)), int_imm(27)));
  Expr read = select(inside, load(x, {at}), float_imm(0));
  Stmt tap = store(out, add(load(out, {v}), read), {v});
  Stmt s = for_loop(v, int_imm(0), int_imm(4 * 28), ForKind::kParallel,
                    for_loop(r, int_imm(0), int_imm(3), ForKind::kUnrolled, tap));
  std::string text = to_string(simplify(unroll_loops(loop_partition(s))));
  EXPECT_EQ(count(text, "for (v, 0, 112) parallel"), 1) << text;
  EXPECT_EQ(count(text, "(((v % 28) >= 1) && ((v % 28) < 27))"), 1) << text;
  EXPECT_EQ(count(text, "let v.row = (v % 28)"), 1) << text;
  EXPECT_EQ(count(text, "let v.outer = (v/28)"), 1) << text;
  // The interior's three taps unguarded; the border keeps the guards of two (the middle tap is
  // never in the padding).
  EXPECT_EQ(count(text, "select"), 2) << text;
  EXPECT_EQ(count(text, "x["), 6) << text;
}

}  // namespace
}  // namespace tunefarm::lower
