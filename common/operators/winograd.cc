#include "common/operators/winograd.h"

#include <algorithm>

#include "common/operators/operator.h"

namespace tunefarm::operators {

const WinogradMatrices& winograd_matrices(int64_t m) {
  static const WinogradMatrices f2{2, 4,
                                   {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1},
                                   {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1},
                                   {1, 1, 1, 0, 0, 1, -1, -1}};
  static const WinogradMatrices f4{4, 6,
                                   {1.0 / 4, 0, 0, -1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6,
                                    1.0 / 24, 1.0 / 12, 1.0 / 6, 1.0 / 24, -1.0 / 12, 1.0 / 6, 0, 0, 1},
                                   {4, 0, -5, 0, 1, 0,  0, -4, -4, 1, 1, 0,  0, 4, -4, -1, 1, 0,
                                    0, -2, -1, 2, 1, 0, 0, 2, -1, -2, 1, 0,  0, 4, 0, -5, 0, 1},
                                   {1, 1, 1, 1, 1, 0,  0, 1, -1, 2, -2, 0,  0, 1, 1, 4, 4, 0,  0, 1, -1, 8, -8, 1}};
  return m == 2 ? f2 : f4;
}

void winograd_weight(const ConvShape& c, const float* oihw, float* u) {
  const WinogradMatrices& t = winograd_matrices(c.winograd);
  const int64_t a = t.alpha;
  std::vector<double> gg(static_cast<size_t>(a * 3));  // G g, alpha x 3
  for (int64_t k = 0; k < c.K; ++k)
    for (int64_t ch = 0; ch < c.C; ++ch) {
      const float* g = oihw + (k * c.C + ch) * 9;
      for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < 3; ++j)
          gg[static_cast<size_t>(i * 3 + j)] = t.G(i, 0) * g[j] + t.G(i, 1) * g[3 + j] + t.G(i, 2) * g[6 + j];
      for (int64_t e = 0; e < a; ++e)
        for (int64_t n = 0; n < a; ++n) {
          double v = 0;
          for (int64_t j = 0; j < 3; ++j) v += gg[static_cast<size_t>(e * 3 + j)] * t.G(n, j);
          u[(((e * a + n) * c.kb() + k / c.oc) * c.C + ch) * c.oc + k % c.oc] = static_cast<float>(v);
        }
    }
}

// The forms' defaults beside the direct template's default, one thread (kernel_bench; the direct
// default runs at 230-270 GFLOP/s on AMD Zen 5): F(4x4) 3.0-3.7x at 28x28 to 56x56 with 32-256
// channels, 2.2x at 256@14x14; F(2x2) 1.6-2.2x at 10x10 to 28x28 with 64-512 channels (1.19x at
// 512@7x7, its 16.8 MB of weights warm). At 512 channels F(4x4) ran 0.93x at 14x14 and 1.31x at
// 28x28, its outputs up to 1.7e-3 from the direct sum (F(2x2)'s within 8.4e-5).
bool winograd_by_default(const Workload& w) {
  if (!is_conv(w)) return false;
  const ConvShape c = conv_shape(w);
  constexpr int64_t kMinSide = 10;
  const int64_t max_channels = c.winograd == 4 ? kWinogradF4MaxChannels : 512;
  return c.winograd > 0 && std::min(c.P, c.Q) >= kMinSide && c.C <= max_channels && c.K <= max_channels;
}

}  // namespace tunefarm::operators
