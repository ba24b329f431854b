#include "compiler/runtime/kernel_runtime.h"

#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace {

int default_threads() {
  if (const char* env = std::getenv("TUNEFARM_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : 1;
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
}

thread_local bool in_parallel_body = false;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long a worker waits for the next launch, and a launcher for its last tasks, before it
// sleeps: a model runs one kernel after another, tens of microseconds each, and waking a sleeping
// thread costs about as much. First a short busy spin (~50 us), then yielding the core (so that on
// a machine with more threads than cores, the thread being waited for gets to run), then sleep:
// an idle pool costs nothing.
constexpr int kSpins = 2000;
constexpr int kYields = 200;

// Waits until `done()` by spinning, then yielding; false if it still is not, and the caller sleeps.
template <typename Done>
bool wait_briefly(Done done) {
  for (int i = 0; i < kSpins; ++i) {
    if (done()) return true;
    cpu_relax();
  }
  for (int i = 0; i < kYields; ++i) {
    if (done()) return true;
    std::this_thread::yield();
  }
  return done();
}

// A fixed pool of workers. One launch at a time: a launch hands out task ids from an atomic
// counter, the caller takes part, and it returns when every task has finished. A task id carries
// its launch's generation and each launch's function sits in the slot of its generation's parity,
// so a worker that arrives late for one launch neither takes a task of the next nor runs a task
// with another launch's function (the next-but-one launch, which reuses the slot, starts only
// after the next one has retagged the counter).
class ThreadPool {
 public:
  explicit ThreadPool(int num_threads) : num_threads_(num_threads < 1 ? 1 : num_threads) {
    for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
  }

  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_.store(true);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  int num_threads() const { return num_threads_; }

  int32_t launch(tunefarm_parallel_lambda fn, void* closure, int32_t num_tasks) {
    std::lock_guard<std::mutex> one_launch(launch_mu_);
    uint32_t gen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      gen = static_cast<uint32_t>(generation_.load(std::memory_order_relaxed) + 1);
      Slot& slot = slots_[gen & 1];
      slot.fn.store(fn, std::memory_order_relaxed);
      slot.closure.store(closure, std::memory_order_relaxed);
      slot.num_tasks.store(num_tasks, std::memory_order_relaxed);
      result_.store(0, std::memory_order_relaxed);
      pending_.store(num_tasks, std::memory_order_relaxed);
      next_task_.store(uint64_t{gen} << 32, std::memory_order_relaxed);
      generation_.store(gen, std::memory_order_release);
    }
    if (sleepers_.load(std::memory_order_acquire) > 0) wake_.notify_all();
    run_tasks(gen, fn, closure, num_tasks);
    if (!wait_briefly([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    return result_.load();
  }

 private:
  // Runs tasks of launch `gen` until its tasks are all handed out (or a newer launch began).
  void run_tasks(uint32_t gen, tunefarm_parallel_lambda fn, void* closure, int32_t num_tasks) {
    in_parallel_body = true;
    int32_t finished = 0;
    for (;;) {
      uint64_t v = next_task_.load(std::memory_order_acquire);
      if (static_cast<uint32_t>(v >> 32) != gen || static_cast<int32_t>(v & 0xffffffffu) >= num_tasks) break;
      if (!next_task_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) continue;
      int32_t task = static_cast<int32_t>(v & 0xffffffffu);
      int32_t rc = fn(task, num_tasks, closure);
      if (rc != 0) {
        int32_t expected = 0;
        result_.compare_exchange_strong(expected, rc);
      }
      ++finished;
    }
    in_parallel_body = false;
    if (finished > 0 && pending_.fetch_sub(finished, std::memory_order_acq_rel) == finished) {
      std::lock_guard<std::mutex> lock(mu_);
      done_.notify_all();
    }
  }

  void worker_loop() {
    uint32_t seen = 0;
    for (;;) {
      uint32_t gen = seen;
      wait_briefly([&] {
        gen = static_cast<uint32_t>(generation_.load(std::memory_order_acquire));
        return gen != seen || stop_.load(std::memory_order_relaxed);
      });
      if (gen == seen) {
        std::unique_lock<std::mutex> lock(mu_);
        sleepers_.fetch_add(1, std::memory_order_acq_rel);
        wake_.wait(lock, [&] { return stop_.load() || static_cast<uint32_t>(generation_.load()) != seen; });
        sleepers_.fetch_sub(1, std::memory_order_acq_rel);
        if (stop_.load()) return;
        gen = static_cast<uint32_t>(generation_.load(std::memory_order_acquire));
      }
      if (stop_.load()) return;
      seen = gen;
      const Slot& slot = slots_[gen & 1];
      run_tasks(gen, slot.fn.load(std::memory_order_relaxed), slot.closure.load(std::memory_order_relaxed),
                slot.num_tasks.load(std::memory_order_relaxed));
    }
  }

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex launch_mu_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> sleepers_{0};
  struct Slot {
    std::atomic<tunefarm_parallel_lambda> fn{nullptr};
    std::atomic<void*> closure{nullptr};
    std::atomic<int32_t> num_tasks{0};
  };
  Slot slots_[2];
  // The generation of the launch (high 32 bits) and its next task id (low 32 bits).
  std::atomic<uint64_t> next_task_{0};
  std::atomic<int32_t> pending_{0};
  std::atomic<int32_t> result_{0};
};

std::mutex pool_mu;
ThreadPool* pool = nullptr;

// The workers run code of the object this runtime is part of (a kernel library may be dlclose'd):
// they are stopped and joined when it is unloaded or the process exits, before the code goes away.
struct PoolReaper {
  ~PoolReaper() {
    std::lock_guard<std::mutex> lock(pool_mu);
    delete pool;
    pool = nullptr;
  }
} pool_reaper;

ThreadPool& get_pool() {
  std::lock_guard<std::mutex> lock(pool_mu);
  if (!pool) pool = new ThreadPool(default_threads());
  return *pool;
}

}  // namespace

extern "C" {

int32_t tunefarm_parallel_launch(tunefarm_parallel_lambda fn, void* closure, int32_t num_tasks) {
  if (in_parallel_body) {
    // Nested parallelism runs inline: the outer loop already occupies the pool.
    int32_t n = num_tasks > 0 ? num_tasks : 1;
    for (int32_t t = 0; t < n; ++t)
      if (int32_t rc = fn(t, n, closure)) return rc;
    return 0;
  }
  ThreadPool& p = get_pool();
  int32_t n = num_tasks > 0 ? num_tasks : p.num_threads();
  if (n == 1 || p.num_threads() == 1) {
    for (int32_t t = 0; t < n; ++t)
      if (int32_t rc = fn(t, n, closure)) return rc;
    return 0;
  }
  return p.launch(fn, closure, n);
}

void* tunefarm_workspace_alloc(int64_t bytes) {
  if (bytes <= 0) bytes = 64;
  size_t size = (static_cast<size_t>(bytes) + 63) & ~size_t{63};
  return std::aligned_alloc(64, size);
}

void tunefarm_workspace_free(void* ptr) { std::free(ptr); }

void tunefarm_runtime_set_num_threads(int32_t num_threads) {
  std::lock_guard<std::mutex> lock(pool_mu);
  delete pool;
  pool = new ThreadPool(num_threads > 0 ? num_threads : default_threads());
}

int32_t tunefarm_runtime_num_threads(void) { return get_pool().num_threads(); }

}  // extern "C"
