#include "measure/timer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

namespace tunefarm {
namespace {

size_t flush_buffer_bytes() {
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (llc <= 0) llc = 32l << 20;
  // Twice the cache, so that no line of the kernel's data survives the sweep.
  return std::min<size_t>(static_cast<size_t>(llc) * 2, size_t{512} << 20);
}

}  // namespace

void flush_cpu_cache() {
  static const size_t bytes = flush_buffer_bytes();
  static std::unique_ptr<char[]> buffer(new char[bytes]);
  static char value = 0;
  std::memset(buffer.get(), ++value, bytes);
  // Keep the compiler from dropping the sweep as a dead store.
  asm volatile("" : : "r"(buffer.get()) : "memory");
}

StatusOr<std::vector<double>> time_kernel(BoundKernel& kernel, const v1::MeasureOptions& options) {
  std::vector<double> costs;
  int number = std::max(1, options.number());
  double min_seconds = options.min_repeat_ms() / 1000.0;
  for (int r = 0; r < options.repeat(); ++r) {
    for (;;) {
      if (options.flush_cache()) kernel.flush_cache();
      TF_ASSIGN_OR_RETURN(double seconds, kernel.time_runs(number));
      if (seconds >= min_seconds) {
        costs.push_back(seconds / number);
        break;
      }
      // Too short to trust: aim straight at min_repeat_ms, but grow at least by the golden ratio
      // so that a kernel whose first runs were slow still converges quickly (as AutoTVM does).
      double per_run = std::max(seconds / number, 1e-9);
      double next = std::max(std::ceil(min_seconds / per_run) + 1, number * 1.618 + 1);
      number = static_cast<int>(std::min(next, 1e9));
    }
  }
  return costs;
}

}  // namespace tunefarm
