#include "measure/stream_speed.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>

namespace tunefarm {
namespace {

// One clone per vector width on x86 (the agent itself is built for the baseline, SSE2): the pass
// runs as wide as the model's JIT-compiled steps do.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void stream_pass(const float* __restrict in, float* __restrict out, long n) {
  for (long i = 0; i < n; ++i) out[i] = in[i] * 1.0001f + 0.5f;
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};

}  // namespace

double measure_stream_bytes_per_s() {
  constexpr long kFloats = 128 * 1024 / 4;
  std::unique_ptr<float, FreeDeleter> in(static_cast<float*>(std::aligned_alloc(64, kFloats * 4)));
  std::unique_ptr<float, FreeDeleter> out(static_cast<float*>(std::aligned_alloc(64, kFloats * 4)));
  if (!in || !out) return 0;
  for (long i = 0; i < kFloats; ++i) in.get()[i] = static_cast<float>(i % 97);
  using Clock = std::chrono::steady_clock;
  double best = 0;
  for (int sample = 0; sample < 20; ++sample) {
    long passes = 0;
    auto start = Clock::now();
    std::chrono::duration<double> elapsed{};
    do {
      stream_pass(in.get(), out.get(), kFloats);
      ++passes;
      elapsed = Clock::now() - start;
    } while (elapsed.count() < 2e-3);
    best = std::max(best, 2.0 * kFloats * 4 * static_cast<double>(passes) / elapsed.count());
  }
  return best;
}

}  // namespace tunefarm
