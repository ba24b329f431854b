#include "compiler/runtime/kernel_runtime.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
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

// How many tasks a loop whose launch leaves the count to the pool (num_tasks = 0) is cut into, per
// thread. Each thread owns a contiguous run of them and works through it from the front; a thread
// that has finished its own takes tasks from the back of another's. With one share per thread, a
// thread that lost its core (a machine busier than its cores) held up the join for the rest of its
// share: a model ran slower on two threads than on one. With several, the thread that keeps its core
// does the other's remaining work, and each thread still reads mostly its own contiguous rows.
constexpr int32_t kTasksPerThread = 4;

// A fixed pool of workers, one launch at a time. The launcher writes the launch (function, closure,
// each thread's run of tasks) and opens it by publishing a new generation; a worker joins it by
// counting itself in `joined_` and then seeing the generation still open. When every task has been
// claimed and run by the launcher, it closes the generation and waits until `joined_` is 0: the
// launch's tasks are then all finished, and no worker can still read its runs when the next launch
// rewrites them (a worker that sees the launch closed leaves without touching them).
class ThreadPool {
 public:
  explicit ThreadPool(int num_threads)
      : num_threads_(num_threads < 1 ? 1 : num_threads), runs_(new Run[static_cast<size_t>(num_threads_)]) {
    for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
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

  // Runs the launch on the pool; false (nothing run) when another thread's launch holds the pool
  // or the pool is backing off, and the caller runs its tasks itself.
  bool try_launch(tunefarm_parallel_lambda fn, void* closure, int32_t num_tasks, int32_t* rc) {
    std::unique_lock<std::mutex> one_launch(launch_mu_, std::try_to_lock);
    if (!one_launch.owns_lock()) return false;
    if (skip_ > 0) {
      --skip_;
      return false;
    }
    fn_ = fn;
    closure_ = closure;
    num_tasks_ = num_tasks;
    result_.store(0, std::memory_order_relaxed);
    for (int i = 0; i < num_threads_; ++i) {
      auto begin = static_cast<uint32_t>(int64_t{num_tasks} * i / num_threads_);
      auto end = static_cast<uint32_t>(int64_t{num_tasks} * (i + 1) / num_threads_);
      runs_[i].tasks.store(pack(begin, end), std::memory_order_relaxed);
    }
    uint64_t open;
    {
      std::lock_guard<std::mutex> lock(mu_);
      open = ((state_.load(std::memory_order_relaxed) >> 1) + 1) << 1 | 1;
      state_.store(open, std::memory_order_seq_cst);
    }
    if (sleepers_.load(std::memory_order_acquire) > 0) wake_.notify_all();
    auto start = std::chrono::steady_clock::now();
    bool helped = run_tasks(0) < num_tasks;
    auto worked = std::chrono::steady_clock::now();
    state_.store(open & ~uint64_t{1}, std::memory_order_seq_cst);
    if (!wait_briefly([&] { return joined_.load(std::memory_order_seq_cst) == 0; })) {
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, [&] { return joined_.load(std::memory_order_seq_cst) == 0; });
    }
    // The pool backs off where it does not pay: where the launcher waited at the join longer than
    // it worked (a worker lost its core inside a task: the launch took longer than on one thread),
    // or where kUnhelped launches in a row ran every task on the launcher (the workers get no core
    // in time; each launch still paid for waking them, and their spinning took CPU time from this
    // process: 2 threads ran 3-5% slower than 1 on a machine whose other vCPU was busy). The next
    // launches run on the calling thread alone, twice as many after each backoff in a row (up to
    // kMaxSkip), so that on a machine that stays busy a model runs about as fast as on one
    // thread, and on one whose cores come free the pool is tried again soon.
    bool waited = std::chrono::steady_clock::now() - worked > worked - start;
    unhelped_ = helped ? 0 : unhelped_ + 1;
    if (waited || unhelped_ >= kUnhelped) {
      backoff_ = std::min(backoff_ > 0 ? 2 * backoff_ : 1, kMaxSkip);
      skip_ = backoff_;
      unhelped_ = 0;
    } else if (helped) {
      backoff_ = 0;
    }
    *rc = result_.load(std::memory_order_relaxed);
    return true;
  }

 private:
  // A thread's run of tasks: the next one its owner takes (low 32 bits) and one past the last, which
  // other threads take from (high 32 bits). Each on its own cache line, so that an owner's claims do
  // not contend with another owner's.
  struct alignas(64) Run {
    std::atomic<uint64_t> tasks{0};
  };
  static uint64_t pack(uint32_t front, uint32_t back) { return uint64_t{back} << 32 | front; }

  // Takes the front task of `run` (its owner) or the back one (another thread); -1 when it is empty.
  static int32_t claim(Run& run, bool front) {
    uint64_t v = run.tasks.load(std::memory_order_relaxed);
    for (;;) {
      auto f = static_cast<uint32_t>(v), b = static_cast<uint32_t>(v >> 32);
      if (f >= b) return -1;
      uint64_t next = front ? pack(f + 1, b) : pack(f, b - 1);
      if (run.tasks.compare_exchange_weak(v, next, std::memory_order_acq_rel, std::memory_order_relaxed))
        return static_cast<int32_t>(front ? f : b - 1);
    }
  }

  // Runs thread `self`'s own tasks, then the others' from their backs, until none is left unclaimed.
  // Answers how many tasks this thread ran.
  int32_t run_tasks(int self) {
    in_parallel_body = true;
    int32_t ran = 0;
    auto run = [&](int32_t task) {
      ++ran;
      if (int32_t rc = fn_(task, num_tasks_, closure_)) {
        int32_t expected = 0;
        result_.compare_exchange_strong(expected, rc);
      }
    };
    for (int32_t task; (task = claim(runs_[self], true)) >= 0;) run(task);
    for (bool found = true; found;) {
      found = false;
      for (int k = 1; k < num_threads_; ++k) {
        Run& victim = runs_[(self + k) % num_threads_];
        for (int32_t task; (task = claim(victim, false)) >= 0;) {
          run(task);
          found = true;
        }
      }
    }
    in_parallel_body = false;
    return ran;
  }

  void worker_loop(int self) {
    uint64_t seen = 0;
    for (;;) {
      uint64_t state = seen;
      auto changed = [&] {
        state = state_.load(std::memory_order_acquire);
        return (state >> 1) != (seen >> 1) || stop_.load(std::memory_order_relaxed);
      };
      if (!wait_briefly(changed)) {
        std::unique_lock<std::mutex> lock(mu_);
        sleepers_.fetch_add(1, std::memory_order_acq_rel);
        wake_.wait(lock, changed);
        sleepers_.fetch_sub(1, std::memory_order_acq_rel);
      }
      if (stop_.load()) return;
      seen = state;
      if (!(state & 1)) continue;  // that launch is over already
      joined_.fetch_add(1, std::memory_order_seq_cst);
      if (state_.load(std::memory_order_seq_cst) == state) run_tasks(self);
      if (joined_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);
        done_.notify_all();
      }
    }
  }

  const int num_threads_;
  std::unique_ptr<Run[]> runs_;
  std::vector<std::thread> workers_;
  std::mutex launch_mu_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::atomic<bool> stop_{false};
  // The launch's generation (high bits) and whether it is open (bit 0).
  std::atomic<uint64_t> state_{0};
  std::atomic<int> sleepers_{0};
  // Workers inside the open launch or leaving it.
  std::atomic<int> joined_{0};
  // The launch; written by the launcher only while no worker has joined.
  tunefarm_parallel_lambda fn_ = nullptr;
  void* closure_ = nullptr;
  int32_t num_tasks_ = 0;
  std::atomic<int32_t> result_{0};
  // Launches still to run on the calling thread, how many the last backoff skipped, and the
  // launches in a row no worker took part in (all under launch_mu_).
  static constexpr int kMaxSkip = 64;
  static constexpr int kUnhelped = 8;
  int skip_ = 0;
  int backoff_ = 0;
  int unhelped_ = 0;
};

std::mutex pool_mu;
// Held by every launch in flight as well: a pool replaced by set_num_threads while another thread
// launches on it goes when that launch is over.
std::shared_ptr<ThreadPool> pool;

// The workers run code of the object this runtime is part of (a kernel library may be dlclose'd):
// they are stopped and joined when it is unloaded or the process exits, before the code goes away.
struct PoolReaper {
  ~PoolReaper() {
    std::lock_guard<std::mutex> lock(pool_mu);
    pool.reset();
  }
} pool_reaper;

std::shared_ptr<ThreadPool> get_pool() {
  std::lock_guard<std::mutex> lock(pool_mu);
  if (!pool) pool = std::make_shared<ThreadPool>(default_threads());
  return pool;
}

int32_t run_inline(tunefarm_parallel_lambda fn, void* closure, int32_t num_tasks) {
  for (int32_t t = 0; t < num_tasks; ++t)
    if (int32_t rc = fn(t, num_tasks, closure)) return rc;
  return 0;
}

}  // namespace

extern "C" {

int32_t tunefarm_parallel_launch(tunefarm_parallel_lambda fn, void* closure, int32_t num_tasks) {
  // On the calling thread a loop the pool would cut is one task: the code a single thread runs.
  int32_t inline_tasks = num_tasks > 0 ? num_tasks : 1;
  // Nested parallelism runs inline: the outer loop already occupies the pool.
  if (in_parallel_body) return run_inline(fn, closure, inline_tasks);
  std::shared_ptr<ThreadPool> p = get_pool();
  int32_t n = num_tasks > 0 ? num_tasks : p->num_threads() * kTasksPerThread;
  int32_t rc = 0;
  // Where another thread's launch (another model instance's step) holds the pool, this one runs
  // on its own thread rather than waiting: the cores are busy either way.
  if (p->num_threads() == 1 || n == 1 || !p->try_launch(fn, closure, n, &rc)) return run_inline(fn, closure, inline_tasks);
  return rc;
}

void* tunefarm_workspace_alloc(int64_t bytes) {
  if (bytes <= 0) bytes = 64;
  size_t size = (static_cast<size_t>(bytes) + 63) & ~size_t{63};
  return std::aligned_alloc(64, size);
}

void tunefarm_workspace_free(void* ptr) { std::free(ptr); }

void tunefarm_runtime_set_num_threads(int32_t num_threads) {
  auto fresh = std::make_shared<ThreadPool>(num_threads > 0 ? num_threads : default_threads());
  std::shared_ptr<ThreadPool> old;
  std::lock_guard<std::mutex> lock(pool_mu);
  old = std::move(pool);
  pool = std::move(fresh);
}

int32_t tunefarm_runtime_num_threads(void) { return get_pool()->num_threads(); }

}  // extern "C"
