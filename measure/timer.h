// The timer. Without min_repeat_ms it has AutoTVM's semantics: `repeat` costs, each the mean of
// `number` back-to-back runs. With min_repeat_ms, each repeat lasts at least that long but is
// timed in samples of about kSampleSeconds (`number` grows until one sample lasts that long),
// and its cost is the median of its samples' per-run times: on a machine shared with other
// processes, a window of 50 ms took in every time slice they held the core for, where most
// samples of a millisecond or less fall between them, as most runs of a built model do. With
// flush_cache, caches are evicted before every sample.
#pragma once

#include <vector>

#include "measure/kernel.h"
#include "tunefarm/v1/common.pb.h"

namespace tunefarm {

// How long one sample of a repeat lasts (shorter when min_repeat_ms is): well under a scheduler's
// time slice, and long enough that the measurer's round trip to the worker is a small part of it.
inline constexpr double kSampleSeconds = 0.5e-3;

// `options` must have passed through with_defaults(). Returns the seconds per run of each repeat.
StatusOr<std::vector<double>> time_kernel(BoundKernel& kernel, const v1::MeasureOptions& options);

// Writes over a host buffer larger than the last-level cache (sized once, from sysconf).
void flush_cpu_cache();

}  // namespace tunefarm
