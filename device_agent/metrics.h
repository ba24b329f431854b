// device-agent's Prometheus metrics: each measurement by its outcome, how long it took, and the
// sandbox worker restarts (after a crash or a timeout the worker is killed and the next candidate
// starts a new one). Every metric carries the agent's id and device key.
#pragma once

#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "tunefarm/v1/common.pb.h"

namespace tunefarm {

class AgentMetrics {
 public:
  AgentMetrics(prometheus::Registry& registry, const std::string& agent_id, const std::string& device_key);

  // One candidate measured; `worker_starts` is how many sandbox workers it started (0 or 1).
  void measured(const v1::MeasureResult& result, double seconds, int worker_starts);

 private:
  prometheus::Family<prometheus::Counter>& measurements_;
  prometheus::Family<prometheus::Counter>& errors_;
  prometheus::Histogram& measure_seconds_;
  prometheus::Counter& worker_restarts_;
};

}  // namespace tunefarm
