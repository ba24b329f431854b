#include "compiler/lower/gpu_barriers.h"

#include <gtest/gtest.h>

#include "compiler/ir/printer.h"

namespace tunefarm {
namespace {

using namespace ir;

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A tile filled, then read: a barrier after the last fill and one after the reads; the same
// shape with a tile in ordinary memory gets none.
TEST(GpuBarriers, ATileFilledThenReadIsFencedOnBothSides) {
  for (MemScope scope : {MemScope::kShared, MemScope::kLocal}) {
    Buffer tile = make_buffer("tile", Type::f32(), {64}, scope);
    Buffer in = make_buffer("in", Type::f32(), {64});
    Buffer out = make_buffer("out", Type::f32(), {64});
    Var i = make_var("i");
    Stmt fill = for_loop(i, int_imm(0), int_imm(64), ForKind::kSerial, store(tile, load(in, {i}), {i}));
    Stmt read = for_loop(i, int_imm(0), int_imm(64), ForKind::kSerial, store(out, load(tile, {i}), {i}));
    std::string text = to_string(lower::insert_gpu_barriers(allocate(tile, block({fill, read}))));
    if (scope == MemScope::kShared) {
      EXPECT_EQ(count(text, "gpu.barrier"), 2) << text;
      EXPECT_LT(text.find("gpu.barrier"), text.find("out[")) << text;
      EXPECT_GT(text.rfind("gpu.barrier"), text.find("out[")) << text;
    } else {
      EXPECT_EQ(count(text, "gpu.barrier"), 0) << text;
    }
  }
}

}  // namespace
}  // namespace tunefarm
