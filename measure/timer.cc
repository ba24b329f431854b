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

// The lower median: with an even count, the faster of the middle two.
double median(std::vector<double> values) {
  auto middle = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
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
  double sample_seconds = std::min(min_seconds, kSampleSeconds);
  for (int r = 0; r < options.repeat(); ++r) {
    std::vector<double> samples;
    double lasted = 0;
    while (samples.empty() || lasted < min_seconds) {
      if (options.flush_cache()) kernel.flush_cache();
      TF_ASSIGN_OR_RETURN(double seconds, kernel.time_runs(number));
      if (seconds >= sample_seconds) {
        samples.push_back(seconds / number);
        lasted += seconds;
        continue;
      }
      // Too short to trust: aim straight at the sample's length, but grow at least by the golden
      // ratio so that a kernel whose first runs were slow still converges quickly (as AutoTVM
      // does). Samples already taken keep their figures.
      double per_run = std::max(seconds / number, 1e-9);
      double next = std::max(std::ceil(sample_seconds / per_run) + 1, number * 1.618 + 1);
      number = static_cast<int>(std::min(next, 1e9));
    }
    costs.push_back(median(std::move(samples)));
  }
  return costs;
}

}  // namespace tunefarm
