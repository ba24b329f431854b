// What a config's figure is. A config may be measured more than once: its trial, and again at the
// end of its job if it was among the best few (search/tuning_loop.h). Every place that names a
// config's speed or a winner — a job's status and watch, `best`, the history's best query, the
// library builder — uses this one rule, so that they agree.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tunefarm {

// The cost (seconds) that stands for a config measured `mean_costs.size()` times, each value the
// mean cost of one measurement: the upper median. With one measurement it is that measurement;
// with two, the slower; with a trial and three re-measurements, the second slowest. A median
// rather than the minimum, because on a shared machine one lucky measurement is common and the
// search's top few are exactly the lucky ones; the upper one, because a figure the kernel cannot
// reproduce is worse than a cautious one. Always one of the values, so that a real measurement
// stands for the config (`best` returns it). 0 for none.
inline double figure_cost(std::vector<double> mean_costs) {
  if (mean_costs.empty()) return 0;
  auto mid = mean_costs.begin() + static_cast<std::ptrdiff_t>(mean_costs.size() / 2);
  std::nth_element(mean_costs.begin(), mid, mean_costs.end());
  return *mid;
}

}  // namespace tunefarm
