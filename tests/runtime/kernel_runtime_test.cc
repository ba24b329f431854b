#include "compiler/runtime/kernel_runtime.h"

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
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

// A loop of n iterations cut as the code generator cuts it (compiler/codegen, emit_parallel): task
// t of k runs [n * t / k, n * (t + 1) / k).
struct Loop {
  int64_t n;
  std::unique_ptr<std::atomic<int>[]> hits;
  std::atomic<int32_t> num_tasks{-1};
  std::atomic<int> inconsistent{0};
  explicit Loop(int64_t iterations) : n(iterations), hits(new std::atomic<int>[static_cast<size_t>(iterations)]) {
    for (int64_t i = 0; i < n; ++i) hits[i].store(0);
  }
};

int32_t loop_share(int32_t task, int32_t k, void* closure) {
  auto* l = static_cast<Loop*>(closure);
  int32_t expected = -1;
  if (!l->num_tasks.compare_exchange_strong(expected, k) && expected != k) l->inconsistent.fetch_add(1);
  for (int64_t i = l->n * task / k; i < l->n * (task + 1) / k; ++i) l->hits[i].fetch_add(1);
  return 0;
}

// Whatever the threads and the task count (the pool's choice with 0, fewer tasks than threads, odd
// counts), every iteration runs exactly once and every task sees the same count.
TEST(KernelRuntime, EveryIterationRunsOnceUnderAnyThreadsAndTaskCounts) {
  for (int threads : {1, 2, 3, 5}) {
    tunefarm_runtime_set_num_threads(threads);
    for (int32_t tasks : {0, 1, 2, 3, 4, 7, 9, 64}) {
      for (int64_t n : {1, 3, 8, 65, 97, 1001}) {
        for (int repeat = 0; repeat < 5; ++repeat) {
          Loop l(n);
          ASSERT_EQ(tunefarm_parallel_launch(loop_share, &l, tasks), 0);
          ASSERT_EQ(l.inconsistent.load(), 0);
          if (tasks > 0) {
            ASSERT_EQ(l.num_tasks.load(), tasks);
          }
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(l.hits[i].load(), 1) << threads << " threads, " << tasks << " tasks, " << n << " iterations: " << i;
        }
      }
    }
  }
  tunefarm_runtime_set_num_threads(2);
}

struct Straggler {
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<int32_t> num_tasks{0};
  std::atomic<int32_t> others_done{0};
  std::atomic<bool> slow_on_caller{false};
  std::atomic<int32_t> off_caller{0};
};

// The second thread's first task cannot finish before every other task has: as if its thread had
// lost its core inside it. It gives up after 10 s and fails the launch.
int32_t straggle(int32_t task, int32_t n, void* closure) {
  auto* s = static_cast<Straggler*>(closure);
  s->num_tasks.store(n);
  if (std::this_thread::get_id() != s->caller) s->off_caller.fetch_add(1);
  if (task == n / 2) s->slow_on_caller.store(std::this_thread::get_id() == s->caller);
  if (task != n / 2) {
    s->others_done.fetch_add(1);
    return 0;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (s->others_done.load() < n - 1) {
    if (std::chrono::steady_clock::now() > deadline) return 99;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return 0;
}

int32_t count_off_caller(int32_t, int32_t, void* closure) {
  auto* s = static_cast<Straggler*>(closure);
  if (std::this_thread::get_id() != s->caller) s->off_caller.fetch_add(1);
  std::this_thread::sleep_for(std::chrono::microseconds(200));
  return 0;
}

// A loop the pool cuts (num_tasks 0) is several tasks per thread, and while one thread is held up
// in a task another runs the rest of that thread's tasks: the join waits for one task, not for a
// thread's whole share. (Whoever runs the slow task: the calling thread takes another's tasks from
// the back, so it reaches the slow one last.)
TEST(KernelRuntime, AThreadHeldUpInATaskLeavesItsOtherTasksToTheRest) {
  for (int threads : {2, 3}) {
    tunefarm_runtime_set_num_threads(threads);
    Straggler s;
    ASSERT_EQ(tunefarm_parallel_launch(straggle, &s, 0), 0) << threads << " threads";
    EXPECT_GE(s.num_tasks.load(), 2 * threads);
    EXPECT_EQ(s.others_done.load(), s.num_tasks.load() - 1);
    // The launcher waited at the join longer than it worked (unless it ran the slow task itself):
    // the pool backs off, and the next launch runs on the calling thread alone.
    if (s.slow_on_caller.load()) continue;
    Straggler next;
    ASSERT_EQ(tunefarm_parallel_launch(count_off_caller, &next, 8), 0);
    EXPECT_EQ(next.off_caller.load(), 0) << threads << " threads";
  }
  tunefarm_runtime_set_num_threads(2);
}

double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Between launches the workers spin only briefly, then sleep: an idle pool costs no core.
TEST(KernelRuntime, AnIdlePoolDoesNotSpin) {
  tunefarm_runtime_set_num_threads(3);
  std::vector<int64_t> out(1000, -1);
  Sum s{&out};
  ASSERT_EQ(tunefarm_parallel_launch(fill_share, &s, 6), 0);
  double before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  double used = process_cpu_seconds() - before;
  // Two spinning workers would use ~0.4 s here.
  EXPECT_LT(used, 0.04) << "the idle pool used " << used << " s of CPU in 0.2 s";
  // And it wakes for the next launch.
  s.calls.store(0);
  ASSERT_EQ(tunefarm_parallel_launch(fill_share, &s, 6), 0);
  EXPECT_EQ(s.calls.load(), 6);
  tunefarm_runtime_set_num_threads(2);
}

int32_t nested_loop(int32_t task, int32_t, void* closure) {
  auto& loops = *static_cast<std::vector<std::unique_ptr<Loop>>*>(closure);
  return tunefarm_parallel_launch(loop_share, loops[static_cast<size_t>(task)].get(), 3);
}

// Two threads launch at once (two model instances run side by side), each with nested launches,
// while a third replaces the pool over and over: every launch finishes with every task run once.
TEST(KernelRuntime, ConcurrentLaunchesAndPoolRestartsFinish) {
  tunefarm_runtime_set_num_threads(2);
  std::atomic<bool> failed{false};
  std::atomic<bool> stop{false};
  auto launcher = [&] {
    for (int round = 0; round < 3000 && !failed.load(); ++round) {
      // Each outer task launches a loop of its own: nested, it runs on that task's thread.
      int32_t outer = 1 + round % 3;
      std::vector<std::unique_ptr<Loop>> loops;
      for (int32_t t = 0; t < outer; ++t) loops.push_back(std::make_unique<Loop>(257));
      if (tunefarm_parallel_launch(nested_loop, &loops, outer) != 0) failed.store(true);
      for (const auto& l : loops)
        for (int64_t i = 0; i < l->n; ++i)
          if (l->hits[i].load() != 1) failed.store(true);
      Loop l(101);
      if (tunefarm_parallel_launch(loop_share, &l, 0) != 0) failed.store(true);
      for (int64_t i = 0; i < 101; ++i)
        if (l.hits[i].load() != 1) failed.store(true);
    }
  };
  std::thread restarter([&] {
    for (int i = 0; !stop.load(); ++i) {
      tunefarm_runtime_set_num_threads(1 + i % 4);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  std::thread a(launcher), b(launcher);
  a.join();
  b.join();
  stop.store(true);
  restarter.join();
  EXPECT_FALSE(failed.load());
  tunefarm_runtime_set_num_threads(2);
}

size_t threads_of_this_process() {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) n += entry.is_directory() ? 1 : 0;
  return n;
}

// A pool made and torn down many times, with and without a launch in between, leaks no thread
// and leaves the next one working.
TEST(KernelRuntime, APoolMadeAndDestroyedRepeatedlyKeepsWorking) {
  tunefarm_runtime_set_num_threads(2);
  size_t threads_before = threads_of_this_process();
  for (int i = 0; i < 200; ++i) {
    tunefarm_runtime_set_num_threads(1 + i % 4);
    if (i % 2) continue;
    Loop l(33);
    ASSERT_EQ(tunefarm_parallel_launch(loop_share, &l, i % 3 == 0 ? 0 : 5), 0);
    for (int64_t k = 0; k < 33; ++k) ASSERT_EQ(l.hits[k].load(), 1) << "pool " << i;
  }
  tunefarm_runtime_set_num_threads(2);
  EXPECT_EQ(tunefarm_runtime_num_threads(), 2);
  EXPECT_EQ(threads_of_this_process(), threads_before);
}

}  // namespace
