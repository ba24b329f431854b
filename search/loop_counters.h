// What the tuning loop counts as it goes, for whoever wants to know: tunerd's Prometheus metrics
// (tuner/metrics.h) implement it. An interface here keeps the search free of any metrics library.
#pragma once

#include "tunefarm/v1/common.pb.h"

namespace tunefarm {

class LoopCounters {
 public:
  virtual ~LoopCounters() = default;
  // A trial the job's budget counts: a config measured, or one that failed to build.
  virtual void trial(v1::ErrorCode error) = 0;
  // One interleaved re-measurement of a job's best candidates.
  virtual void remeasurement(v1::ErrorCode error) = 0;
  // A candidate no agent measured (DEVICE_LOST): it costs no trial and is proposed again.
  virtual void unmeasured() = 0;
  // A candidate built (`error` OK) or refused by the compiler (INVALID_CONFIG, COMPILE_ERROR).
  virtual void built(v1::ErrorCode error, double seconds) = 0;
};

}  // namespace tunefarm
