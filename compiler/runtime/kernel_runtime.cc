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

// A fixed pool of workers. One launch at a time: a launch hands out task ids from an atomic
// counter, the caller takes part, and it returns when every task has finished.
class ThreadPool {
 public:
  explicit ThreadPool(int num_threads) : num_threads_(num_threads < 1 ? 1 : num_threads) {
    for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
  }

  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  int num_threads() const { return num_threads_; }

  int32_t launch(tunefarm_parallel_lambda fn, void* closure, int32_t num_tasks) {
    std::lock_guard<std::mutex> one_launch(launch_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = fn;
      closure_ = closure;
      num_tasks_ = num_tasks;
      next_task_.store(0);
      pending_ = num_tasks;
      result_.store(0);
      ++generation_;
    }
    wake_.notify_all();
    run_tasks();
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return pending_ == 0; });
    fn_ = nullptr;
    return result_.load();
  }

 private:
  void run_tasks() {
    in_parallel_body = true;
    int finished = 0;
    for (int32_t task = next_task_.fetch_add(1); task < num_tasks_; task = next_task_.fetch_add(1)) {
      int32_t rc = fn_(task, num_tasks_, closure_);
      if (rc != 0) {
        int32_t expected = 0;
        result_.compare_exchange_strong(expected, rc);
      }
      ++finished;
    }
    in_parallel_body = false;
    if (finished > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      pending_ -= finished;
      if (pending_ == 0) done_.notify_all();
    }
  }

  void worker_loop() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return stop_ || (generation_ != seen && fn_ != nullptr); });
        if (stop_) return;
        seen = generation_;
      }
      run_tasks();
    }
  }

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex launch_mu_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  tunefarm_parallel_lambda fn_ = nullptr;
  void* closure_ = nullptr;
  int32_t num_tasks_ = 0;
  std::atomic<int32_t> next_task_{0};
  int32_t pending_ = 0;
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
