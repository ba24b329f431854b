// Tail handling: loops split where a min changes sides, leaving constant extents in each part.
#include <gtest/gtest.h>

#include "compiler/ir/printer.h"
#include "compiler/lower/loop_partition.h"

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

}  // namespace
}  // namespace tunefarm::lower
