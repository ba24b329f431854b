// Winograd's minimal filtering F(m x m, 3x3) (Lavin and Gray, 2015), as conv2d_nchwc computes it
// with `winograd=m`: each m x m tile of the output is A^T [ U (.) V ] A summed over input
// channels, where U = G g G^T is a 3x3 filter g transformed to an alpha x alpha tile (alpha = m + 2)
// and V = B^T d B the alpha x alpha tile of the input d under it. The filters are transformed once,
// by whoever holds the weights (a model build); the kernel transforms the input and the output.
// One definition of the matrices serves the kernels' templates, their reference and the model
// build, so that all three compute the same transform.
#pragma once

#include <cstdint>
#include <vector>

#include "common/operators/conv.h"

namespace tunefarm::operators {

struct WinogradMatrices {
  int64_t m = 0, alpha = 0;
  std::vector<double> g;   // G, alpha x 3: the filter transform
  std::vector<double> bt;  // B^T, alpha x alpha: the input transform
  std::vector<double> at;  // A^T, m x alpha: the output transform
  double G(int64_t i, int64_t j) const { return g[static_cast<size_t>(i * 3 + j)]; }
  double BT(int64_t i, int64_t j) const { return bt[static_cast<size_t>(i * alpha + j)]; }
  double AT(int64_t i, int64_t j) const { return at[static_cast<size_t>(i * alpha + j)]; }
};

// F(2x2, 3x3) (interpolation points 0, 1, -1, infinity) or F(4x4, 3x3) (0, 1, -1, 2, -2,
// infinity). `m` must be 2 or 4.
const WinogradMatrices& winograd_matrices(int64_t m);

// A convolution's OIHW weight [K, C, 3, 3] transformed to the layout its winograd kernel reads,
// U [alpha, alpha, K/oc, C, oc]: U[e][n][k/oc][c][k%oc] = (G g[k][c] G^T)[e][n]. `c.winograd` > 0;
// `u` holds alpha * alpha * K * C floats.
void winograd_weight(const ConvShape& c, const float* oihw, float* u);

// The most channels (either way) F(4x4) is the form for: wider, F(2x2) (model/tasks.h
// winograd_form), whose weights are 16/36 of F(4x4)'s and its rounding a tenth.
constexpr int64_t kWinogradF4MaxChannels = 256;

// Whether a build with no records of a convolution takes its Winograd form `w` (winograd > 0)
// rather than the direct kernel: where the form's default config runs well ahead of the direct
// default (outputs of 10x10 or more; F(4x4) up to kWinogradF4MaxChannels each way, F(2x2) up to
// 512). Wider layers are left to a tuned build: their transformed weights (4x the direct one for
// F(4x4)) stream from memory, and F(4x4)'s rounding grows with the channels (bench/RESULTS.md).
// False for every other workload.
bool winograd_by_default(const Workload& w);

}  // namespace tunefarm::operators
