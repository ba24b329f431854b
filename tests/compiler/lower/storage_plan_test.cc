// Storage planning: an intermediate at the root gets its whole tensor (on the stack when small, in
// the workspace otherwise); one computed at a consumer's loop gets just the region that loop reads,
// in registers, laid out in its own loop order; a tensor the kernel does not take is an error.
#include <gtest/gtest.h>

#include "compiler/lower/bound_inference.h"
#include "compiler/lower/storage_plan.h"

namespace tunefarm::lower {
namespace {

using ir::Var;

struct TwoStages {
  te::Tensor a, b, c;
};

// b = a * 2 over n x n, then c = b + 1.
TwoStages two_stages(int64_t n) {
  TwoStages t;
  t.a = te::placeholder("a", {n, n});
  t.b = te::compute("b", {n, n}, [&](const std::vector<Var>& i) { return t.a(i[0], i[1]) * ir::float_imm(2); }, {"i", "j"});
  t.c = te::compute("c", {n, n}, [&](const std::vector<Var>& i) { return t.b(i[0], i[1]) + ir::float_imm(1); }, {"i", "j"});
  return t;
}

TEST(StoragePlan, AnIntermediateAtTheRootIsTheWholeTensorOnTheStackOrInTheWorkspace) {
  for (auto [n, scope] : {std::pair{int64_t{16}, ir::MemScope::kStack}, std::pair{int64_t{512}, ir::MemScope::kWorkspace}}) {
    TwoStages t = two_stages(n);
    schedule::Schedule s({t.c});
    auto plan = plan_storage(s, *infer_bounds(s), {t.a, t.c});
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    ASSERT_EQ(plan->buffers.size(), 1u);
    const PlannedBuffer& b = plan->buffers.at(t.b.buffer().get());
    EXPECT_EQ(b.buffer->shape, (std::vector<int64_t>{n, n}));
    EXPECT_EQ(b.buffer->scope, scope) << n;
    EXPECT_TRUE(plan->attached.empty());
  }
}

TEST(StoragePlan, AStageAtAConsumerLoopGetsTheRegionInItsOwnLoopOrder) {
  TwoStages t = two_stages(16);
  schedule::Schedule s({t.c});
  auto& c = s[t.c];
  auto [io, ii] = c.split(c.axis(0), 4);
  auto& b = s[t.b];
  // b's loops run j outside i: its buffer puts i last, so that its innermost loop is contiguous.
  b.reorder({b.axis(1), b.axis(0)});
  b.compute_at(c, io);
  auto plan = plan_storage(s, *infer_bounds(s), {t.a, t.c});
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const PlannedBuffer& pb = plan->buffers.at(t.b.buffer().get());
  EXPECT_EQ(pb.buffer->scope, ir::MemScope::kLocal);
  EXPECT_EQ(pb.order, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(pb.buffer->shape, (std::vector<int64_t>{16, 4}));
  ASSERT_EQ(plan->attached.count(io.get()), 1u);
  EXPECT_EQ(plan->attached.at(io.get()).size(), 1u);
}

TEST(StoragePlan, AnInputThatIsNotAKernelArgumentIsAnError) {
  TwoStages t = two_stages(8);
  schedule::Schedule s({t.c});
  auto plan = plan_storage(s, *infer_bounds(s), {t.c});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("tensor a"), std::string::npos) << plan.status().message();
}

}  // namespace
}  // namespace tunefarm::lower
