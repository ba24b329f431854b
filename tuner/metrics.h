// tunerd's Prometheus metrics. The tuning loop counts its trials (by outcome), re-measurements
// and builds (with their time) as they happen, the history's writer times each transaction, and
// the jobs-by-state gauge is read from the history on each scrape.
#pragma once

#include <map>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "search/loop_counters.h"
#include "tunefarm/v1/tuner.pb.h"

namespace tunefarm {

class TunerMetrics : public LoopCounters {
 public:
  explicit TunerMetrics(prometheus::Registry& registry);

  // The tuning loop's counts (search/loop_counters.h).
  void trial(v1::ErrorCode error) override;
  void remeasurement(v1::ErrorCode error) override;
  void unmeasured() override;
  void built(v1::ErrorCode error, double seconds) override;
  // A history write transaction (records, job states and progress).
  void history_write(double seconds, size_t writes, bool committed);
  // Sets the jobs gauge: every state is set, 0 where no job is in it.
  void sample_jobs(const std::map<v1::JobState, int64_t>& counts);

 private:
  prometheus::Family<prometheus::Counter>& trials_;
  prometheus::Family<prometheus::Counter>& remeasurements_;
  prometheus::Counter& unmeasured_;
  prometheus::Family<prometheus::Counter>& builds_;
  prometheus::Histogram& build_seconds_;
  prometheus::Histogram& history_write_seconds_;
  prometheus::Family<prometheus::Counter>& history_writes_;
  prometheus::Family<prometheus::Gauge>& jobs_;
};

}  // namespace tunefarm
