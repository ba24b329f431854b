// trackerd's Prometheus metrics. The Broker counts its events as they happen (a lease given, a
// candidate requeued, a result delivered, the time a candidate waited for an agent); the gauges of
// the farm's state (agents, queue depth) are set from the Broker's queue status on each scrape.
#pragma once

#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "tunefarm/v1/tracker.pb.h"

namespace tunefarm {

class TrackerMetrics {
 public:
  explicit TrackerMetrics(prometheus::Registry& registry);

  // From the Broker, with its lock held (each call takes only the family's own lock).
  void lease(const std::string& device_key, int candidates);
  void dispatch_wait(const std::string& device_key, double seconds);
  void requeued(const std::string& device_key, int candidates);
  void lease_expired(const std::string& device_key);
  void result(const std::string& device_key, v1::ErrorCode error);
  void agent_lost(const std::string& device_key);
  // From the service: a call of `rpc` refused for its token once its request had been read.
  void refused(const std::string& rpc);

  // Sets the state gauges from a queue status of every key.
  void sample(const v1::QueueStatusResponse& status);

 private:
  prometheus::Family<prometheus::Counter>& leases_;
  prometheus::Family<prometheus::Counter>& leased_candidates_;
  prometheus::Family<prometheus::Histogram>& dispatch_latency_;
  prometheus::Family<prometheus::Counter>& requeued_;
  prometheus::Family<prometheus::Counter>& lease_expirations_;
  prometheus::Family<prometheus::Counter>& results_;
  prometheus::Family<prometheus::Counter>& agents_lost_;
  prometheus::Family<prometheus::Counter>& refused_;
  prometheus::Family<prometheus::Gauge>& agents_;
  prometheus::Family<prometheus::Gauge>& agents_free_;
  prometheus::Family<prometheus::Gauge>& agents_busy_;
  prometheus::Family<prometheus::Gauge>& queued_candidates_;
  prometheus::Family<prometheus::Gauge>& queued_batches_;
};

}  // namespace tunefarm
