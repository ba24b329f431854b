// The timer. Without min_repeat_ms it has AutoTVM's semantics: `repeat` costs, each the mean of
// `number` back-to-back runs. With min_repeat_ms, each repeat lasts at least that long but is
// timed in samples of about kSampleSeconds (`number` grows until one sample lasts that long),
// and its cost is the median of its samples' per-run times. On a machine shared with other
// processes the measurer leaves out of each sample the time spent waiting for a CPU (measure.cc,
// cpu_wait.h); what the others still cost a sample (caches they evicted, a wait the scheduler
// counted late) falls on a few samples, which the median leaves out, as a built model's median
// latency leaves out its slow runs. With flush_cache, caches are evicted before every sample.
#pragma once

#include <vector>

#include "measure/kernel.h"
#include "tunefarm/v1/common.pb.h"

namespace tunefarm {

// How long one sample of a repeat lasts (shorter when min_repeat_ms is): about a scheduler's time
// slice or less, and five times the measurer's allowance for its round trip to the worker
// (measure.cc), within which a candidate could make its own samples look shorter.
inline constexpr double kSampleSeconds = 1e-3;

// `options` must have passed through with_defaults(). Returns the seconds per run of each repeat.
StatusOr<std::vector<double>> time_kernel(BoundKernel& kernel, const v1::MeasureOptions& options);

// Writes over a host buffer larger than the last-level cache (sized once, from sysconf).
void flush_cpu_cache();

}  // namespace tunefarm
