#include "tracker/metrics.h"

#include "common/http/metrics.h"

namespace tunefarm {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

TrackerMetrics::TrackerMetrics(prometheus::Registry& r)
    : leases_(BuildCounter()
                  .Name("tunefarm_tracker_leases_total")
                  .Help("Leases given to agents (a chunk of one request each)")
                  .Register(r)),
      leased_candidates_(BuildCounter()
                             .Name("tunefarm_tracker_leased_candidates_total")
                             .Help("Candidates leased to agents, each attempt counted")
                             .Register(r)),
      dispatch_latency_(BuildHistogram()
                            .Name("tunefarm_tracker_dispatch_latency_seconds")
                            .Help("How long a candidate waited in the queue (since it was submitted or requeued) "
                                  "before an agent was leased it")
                            .Register(r)),
      requeued_(BuildCounter()
                    .Name("tunefarm_tracker_requeued_candidates_total")
                    .Help("Candidates put back in the queue because their agent was lost, its lease expired or it "
                          "ended its lease unanswered")
                    .Register(r)),
      lease_expirations_(BuildCounter()
                             .Name("tunefarm_tracker_lease_expirations_total")
                             .Help("Leases whose deadline passed before every candidate was answered")
                             .Register(r)),
      results_(BuildCounter()
                   .Name("tunefarm_tracker_results_total")
                   .Help("Results delivered to tuners, by error code (DEVICE_LOST: no agent could measure it)")
                   .Register(r)),
      agents_lost_(BuildCounter()
                       .Name("tunefarm_tracker_agent_sessions_ended_total")
                       .Help("Agent sessions that ended (the agent left, was dropped for silence or was replaced)")
                       .Register(r)),
      refused_(BuildCounter()
                   .Name("tunefarm_tracker_calls_refused_total")
                   .Help("Calls the service refused for their token after their request was read (those without any "
                         "of the farm's tokens are refused before, by the gate, and are not counted)")
                   .Register(r)),
      agents_(BuildGauge().Name("tunefarm_tracker_agents").Help("Agents connected").Register(r)),
      agents_free_(BuildGauge().Name("tunefarm_tracker_agents_free").Help("Agents waiting for work").Register(r)),
      agents_busy_(BuildGauge().Name("tunefarm_tracker_agents_busy").Help("Agents measuring a lease").Register(r)),
      queued_candidates_(BuildGauge()
                             .Name("tunefarm_tracker_queued_candidates")
                             .Help("Candidates waiting for an agent (queue depth)")
                             .Register(r)),
      queued_batches_(BuildGauge()
                          .Name("tunefarm_tracker_queued_batches")
                          .Help("Measure requests with candidates waiting for an agent")
                          .Register(r)) {}

void TrackerMetrics::lease(const std::string& key, int candidates) {
  leases_.Add({{"device_key", key}}).Increment();
  leased_candidates_.Add({{"device_key", key}}).Increment(candidates);
}

void TrackerMetrics::dispatch_wait(const std::string& key, double seconds) {
  dispatch_latency_.Add({{"device_key", key}}, duration_buckets()).Observe(seconds);
}

void TrackerMetrics::requeued(const std::string& key, int candidates) {
  requeued_.Add({{"device_key", key}}).Increment(candidates);
}

void TrackerMetrics::lease_expired(const std::string& key) { lease_expirations_.Add({{"device_key", key}}).Increment(); }

void TrackerMetrics::result(const std::string& key, v1::ErrorCode error) {
  results_.Add({{"device_key", key}, {"error", v1::ErrorCode_Name(error)}}).Increment();
}

void TrackerMetrics::agent_lost(const std::string& key) { agents_lost_.Add({{"device_key", key}}).Increment(); }

void TrackerMetrics::refused(const std::string& rpc) { refused_.Add({{"rpc", rpc}}).Increment(); }

void TrackerMetrics::sample(const v1::QueueStatusResponse& status) {
  for (const v1::DeviceKeyStatus& key : status.keys()) {
    prometheus::Labels labels{{"device_key", key.device_key()}};
    agents_.Add(labels).Set(key.agents_total());
    agents_free_.Add(labels).Set(key.agents_free());
    agents_busy_.Add(labels).Set(key.agents_busy());
    queued_candidates_.Add(labels).Set(static_cast<double>(key.pending_candidates()));
    queued_batches_.Add(labels).Set(key.pending_batches());
  }
}

}  // namespace tunefarm
