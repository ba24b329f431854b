#include "device_agent/metrics.h"

#include "common/metrics.h"

namespace tunefarm {

using prometheus::BuildCounter;
using prometheus::BuildHistogram;

AgentMetrics::AgentMetrics(prometheus::Registry& r, const std::string& agent_id, const std::string& device_key)
    : measurements_(BuildCounter()
                        .Name("tunefarm_agent_measurements_total")
                        .Help("Candidates measured, by outcome (error code; OK for a good measurement)")
                        .Labels({{"agent_id", agent_id}, {"device_key", device_key}})
                        .Register(r)),
      errors_(BuildCounter()
                  .Name("tunefarm_agent_errors_total")
                  .Help("Candidates that came back with an error, by error code")
                  .Labels({{"agent_id", agent_id}, {"device_key", device_key}})
                  .Register(r)),
      measure_seconds_(BuildHistogram()
                           .Name("tunefarm_agent_measure_seconds")
                           .Help("Time to measure one candidate (load, check, time), reference included")
                           .Labels({{"agent_id", agent_id}, {"device_key", device_key}})
                           .Register(r)
                           .Add({}, duration_buckets())),
      worker_restarts_(BuildCounter()
                           .Name("tunefarm_agent_worker_restarts_total")
                           .Help("Sandbox worker processes started again after one was killed (a crash, a timeout, "
                                 "a runtime error)")
                           .Labels({{"agent_id", agent_id}, {"device_key", device_key}})
                           .Register(r)
                           .Add({})) {}

void AgentMetrics::measured(const v1::MeasureResult& result, double seconds, int worker_starts) {
  std::string code = v1::ErrorCode_Name(result.error());
  measurements_.Add({{"error", code}}).Increment();
  if (result.error() != v1::OK) errors_.Add({{"error", code}}).Increment();
  measure_seconds_.Observe(seconds);
  if (worker_starts > 0) worker_restarts_.Increment(worker_starts);
}

}  // namespace tunefarm
