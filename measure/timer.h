// The timer, with AutoTVM's semantics: `repeat` costs, each the mean of `number` back-to-back
// runs; when min_repeat_ms is set, `number` grows until one repeat lasts at least that long; with
// flush_cache, caches are evicted before every repeat.
#pragma once

#include <vector>

#include "measure/kernel.h"
#include "tunefarm/v1/common.pb.h"

namespace tunefarm {

// `options` must have passed through with_defaults(). Returns the seconds per run of each repeat.
StatusOr<std::vector<double>> time_kernel(BoundKernel& kernel, const v1::MeasureOptions& options);

// Writes over a host buffer larger than the last-level cache (sized once, from sysconf).
void flush_cpu_cache();

}  // namespace tunefarm
