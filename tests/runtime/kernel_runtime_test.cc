#include "compiler/runtime/kernel_runtime.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace {

struct Sum {
  std::vector<int64_t>* out;
  std::atomic<int> calls{0};
};

int32_t fill_share(int32_t task, int32_t n, void* closure) {
  auto* s = static_cast<Sum*>(closure);
  int64_t size = static_cast<int64_t>(s->out->size());
  int64_t begin = size * task / n, end = size * (task + 1) / n;
  for (int64_t i = begin; i < end; ++i) (*s->out)[i] = i * 2;
  s->calls.fetch_add(1);
  return 0;
}

int32_t fail_on_three(int32_t task, int32_t, void*) { return task == 3 ? 42 : 0; }

int32_t nested(int32_t, int32_t, void* closure) {
  return tunefarm_parallel_launch(fill_share, closure, 4);
}

TEST(KernelRuntime, RunsEveryTaskOnceAndCoversTheRange) {
  tunefarm_runtime_set_num_threads(2);
  for (int round = 0; round < 200; ++round) {
    std::vector<int64_t> out(1000, -1);
    Sum s{&out};
    ASSERT_EQ(tunefarm_parallel_launch(fill_share, &s, 7), 0);
    ASSERT_EQ(s.calls.load(), 7);
    for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(out[i], i * 2);
  }
}

struct Tally {
  std::atomic<int> runs[16];
  int32_t expected_n;
  std::atomic<int> wrong_n{0};
};

int32_t tally(int32_t task, int32_t n, void* closure) {
  auto* t = static_cast<Tally*>(closure);
  if (n != t->expected_n) t->wrong_n.fetch_add(1);
  t->runs[task].fetch_add(1);
  return 0;
}

// Back-to-back launches of different sizes, each with its own closure on the stack: workers that
// spin between launches and arrive late for one must not run a task twice, run one of the next
// launch with the old closure, or miss one; and after the pool has gone to sleep it wakes again.
TEST(KernelRuntime, BackToBackLaunchesRunEachTaskOnceAndAnIdlePoolWakes) {
  tunefarm_runtime_set_num_threads(4);
  for (int round = 0; round < 20000; ++round) {
    Tally t;
    t.expected_n = 1 + round % 16;
    for (auto& r : t.runs) r.store(0);
    ASSERT_EQ(tunefarm_parallel_launch(tally, &t, t.expected_n), 0);
    ASSERT_EQ(t.wrong_n.load(), 0) << "round " << round;
    for (int i = 0; i < 16; ++i) ASSERT_EQ(t.runs[i].load(), i < t.expected_n ? 1 : 0) << "round " << round << " task " << i;
    if (round % 5000 == 4999) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  tunefarm_runtime_set_num_threads(2);
}

TEST(KernelRuntime, ReportsTheFirstFailure) {
  tunefarm_runtime_set_num_threads(2);
  EXPECT_EQ(tunefarm_parallel_launch(fail_on_three, nullptr, 8), 42);
}

TEST(KernelRuntime, NestedLaunchRunsInline) {
  tunefarm_runtime_set_num_threads(2);
  std::vector<int64_t> out(64, -1);
  Sum s{&out};
  EXPECT_EQ(tunefarm_parallel_launch(nested, &s, 2), 0);
  EXPECT_EQ(s.calls.load(), 8);
  EXPECT_EQ(out[63], 126);
}

TEST(KernelRuntime, WorkspaceIsAligned) {
  void* p = tunefarm_workspace_alloc(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  tunefarm_workspace_free(p);
  EXPECT_EQ(tunefarm_runtime_num_threads(), 2);
}

}  // namespace
