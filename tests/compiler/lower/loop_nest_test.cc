// Loop-nest construction: reduction init placement, attached stages and their allocations.
#include <gtest/gtest.h>

#include "compiler/ir/printer.h"
#include "compiler/lower/bound_inference.h"
#include "compiler/lower/loop_nest.h"

namespace tunefarm::lower {
namespace {

using ir::Var;

// Storage planning, then the loop nest, as lower_loops does.
StatusOr<ir::LoweredFunc> build_loop_nest(const schedule::Schedule& s, const Bounds& bounds,
                                          const std::vector<te::Tensor>& args, const std::string& name) {
  TF_ASSIGN_OR_RETURN(StoragePlan plan, plan_storage(s, bounds, args));
  return lower::build_loop_nest(s, bounds, plan, args, name);
}

TEST(LoopNest, ReductionInitGoesBeforeTheOutermostReductionLoop) {
  te::Tensor a = te::placeholder("a", {4, 6});
  auto k = te::reduce_axis(6, "k");
  te::Tensor c = te::compute("c", {4}, [&](const std::vector<Var>& i) { return te::sum(a(i[0], k->var), {k}); }, {"i"});
  schedule::Schedule s({c});
  auto bounds = *infer_bounds(s);
  auto f = build_loop_nest(s, bounds, {a, c}, "k");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(ir::to_string(f->body),
            "for (i, 0, 4) {\n"
            "  c[i] = 0f\n"
            "  for (k, 0, 6) {\n"
            "    c[i] = (c[i] + a[i, k])\n"
            "  }\n"
            "}\n");
}

TEST(LoopNest, CacheWriteStageIsAllocatedInsideTheTileLoop) {
  te::Tensor a = te::placeholder("a", {8, 8});
  te::Tensor c = te::compute("c", {8, 8}, [&](const std::vector<Var>& i) { return a(i[0], i[1]) * ir::float_imm(3); }, {"i", "j"});
  schedule::Schedule s({c});
  te::Tensor local = s.cache_write(c, ir::MemScope::kLocal);
  s[local].compute_at(s[c], s[c].axis(0));
  auto bounds = *infer_bounds(s);
  auto f = build_loop_nest(s, bounds, {a, c}, "k");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::string text = ir::to_string(f->body);
  EXPECT_NE(text.find("  allocate c.local[float32 * 1 * 8] in local"), std::string::npos) << text;
  // Rebased to the region start (simplification later folds i - i).
  EXPECT_NE(text.find("c[i, j] = c.local[(i - i), j]"), std::string::npos) << text;
}

TEST(LoopNest, LocalTileIsLaidOutInItsLoopOrder) {
  te::Tensor a = te::placeholder("a", {4, 16});
  te::Tensor c = te::compute("c", {4, 16}, [&](const std::vector<Var>& i) { return a(i[0], i[1]); }, {"i", "j"});
  schedule::Schedule s({c});
  te::Tensor local = s.cache_write(c, ir::MemScope::kLocal);
  auto [jo, ji] = s[c].split(s[c].axis(1), 8);
  s[c].reorder({jo, s[c].axis(0), ji});
  s[local].compute_at(s[c], jo);
  // The local stage runs its j loop outside its i loop, so its buffer is [j][i].
  s[local].reorder({s[local].axis(1), s[local].axis(0)});
  auto bounds = *infer_bounds(s);
  auto f = build_loop_nest(s, bounds, {a, c}, "k");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::string text = ir::to_string(f->body);
  EXPECT_NE(text.find("allocate c.local[float32 * 8 * 4] in local"), std::string::npos) << text;
  EXPECT_NE(text.find("c.local[j.c, i.c] ="), std::string::npos) << text;
}

TEST(LoopNest, ArgumentsMustIncludeInputsAndOutputs) {
  te::Tensor a = te::placeholder("a", {4});
  te::Tensor c = te::compute("c", {4}, [&](const std::vector<Var>& i) { return a(i[0]); });
  schedule::Schedule s({c});
  auto bounds = *infer_bounds(s);
  auto f = build_loop_nest(s, bounds, {c}, "k");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("not a kernel argument"), std::string::npos);
}

}  // namespace
}  // namespace tunefarm::lower
