// A tiny fork-join helper for the tuner's CPU-bound loops (building candidates, computing features).
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>
#include <vector>

namespace tunefarm {

// Runs fn(i) for i in [0, n) on up to `threads` threads (the caller's among them), handing out
// indices one at a time so that uneven items balance.
inline void parallel_for(int n, int threads, const std::function<void(int)>& fn) {
  threads = std::max(1, std::min(threads, n));
  std::atomic<int> next{0};
  auto work = [&] {
    for (int i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

}  // namespace tunefarm
