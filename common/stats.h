// Small summary statistics shared by the tuning loop and the benchmarks.
#pragma once

#include <algorithm>
#include <vector>

namespace tunefarm {

// The median (mean of the middle two for an even count); 0 for no values.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace tunefarm
