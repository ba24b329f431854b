// The tolerance of the correctness check: how far a candidate's output may be from the
// reference's and still be right. Header-only and free of protobuf, so that benchmarks that check
// kernels outside a sandbox (bench/kernel_bench.cc) apply the very same rule.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tunefarm {

// Tolerances for an output element that is one product (a reduction of length 1); the check
// scales both by the square root of the reduction length (below).
//
// Why sqrt(K): a float32 sum of K products of random sign (our inputs are uniform in [-1, 1)) has
// a relative rounding error of about 0.7 * u * sqrt(K) (u = 2^-24 = 6e-8), since each addition
// rounds a partial sum that itself grows like sqrt(k); outputs near zero differ, in absolute terms,
// about as much as outputs of typical size, hence the atol. The reference kernel sums in double
// (te/widen_reductions.h), so what the check sees is the candidate's own rounding, and the worst of
// many elements a few times more. A fixed 1e-4 rejected every correct kernel of a 512-channel 3x3
// convolution (K = 4,608, differences up to 1.2e-4 against a float reference).
//
// Why 1e-5: over 20,000 random outputs, the worst difference between a sequential and an 8-lane
// float32 sum, divided by sqrt(K) * (1 + |reference|), is 8.6e-7 at K = 4,608 and 2.1e-6 at
// K = 25,088 (a VGG classifier): 1e-5 leaves a margin of 5 to 10, and at K = 100 it is the 1e-4 the
// check used before it scaled. It still fails a kernel that is wrong: at K = 4,608 it allows 1.6e-2
// on an element of typical size (sqrt(K) / 3 = 23), while a missing or doubled product moves one
// by 0.25 on average and an element 1% off by 0.23. tests/measure/tensors_test.cc checks both.
inline constexpr double kDefaultRtol = 1e-5;
inline constexpr double kDefaultAtol = 1e-5;

struct Tolerance {
  double rtol = kDefaultRtol;
  double atol = kDefaultAtol;
};

// The tolerance for outputs that each sum `reduction_length` products (1 or less: no scaling).
inline Tolerance scaled_tolerance(double rtol, double atol, int64_t reduction_length) {
  double scale = std::sqrt(static_cast<double>(std::max<int64_t>(reduction_length, 1)));
  return {rtol * scale, atol * scale};
}

// Whether one output element passes. NaN never compares within tolerance, so a NaN output (or a
// NaN reference) is always a difference.
inline bool within_tolerance(double got, double expected, const Tolerance& tolerance) {
  return std::fabs(got - expected) <= tolerance.atol + tolerance.rtol * std::fabs(expected);
}

}  // namespace tunefarm
