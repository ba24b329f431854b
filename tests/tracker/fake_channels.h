// In-memory channels and a hand-driven clock for driving a Broker without a network.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "tracker/broker.h"

namespace tunefarm::testing {

struct FakeAgent : AgentChannel {
  void send_batch(v1::LeasedBatch batch) override { batches.push_back(std::move(batch)); }
  void close(const Status& why) override { closed = why; was_closed = true; }
  std::vector<v1::LeasedBatch> batches;
  bool was_closed = false;
  Status closed;
};

struct FakeTuner : TunerChannel {
  void send_result(v1::MeasureResponse r) override { results.push_back(std::move(r)); }
  void finish() override { ++finished; }
  std::vector<v1::MeasureResponse> results;
  int finished = 0;
  std::map<uint64_t, int> count_by_candidate() const {
    std::map<uint64_t, int> counts;
    for (const auto& r : results) counts[r.candidate_id()]++;
    return counts;
  }
};

struct FakeClock {
  BrokerClock::time_point now = BrokerClock::time_point() + std::chrono::hours(1);
  void advance(std::chrono::milliseconds d) { now += d; }
};

inline v1::Workload small_matmul() {
  v1::Workload w;
  w.set_op("matmul");
  for (const char* p : {"M", "N", "K"}) {
    auto* param = w.add_params();
    param->set_name(p);
    param->set_value(64);
  }
  return w;
}

inline v1::AgentHello hello(const std::string& id, const std::string& key = "cpu") {
  v1::AgentHello h;
  h.set_agent_id(id);
  h.set_device_key(key);
  h.mutable_capabilities()->set_num_cores(2);
  return h;
}

// A request of `n` candidates (ids first_id...), with tiny artifacts that never get loaded here.
inline v1::MeasureRequest request(int n, const std::string& job = "job", int priority = 0,
                                  const std::string& key = "cpu", uint64_t first_id = 0) {
  v1::MeasureRequest r;
  r.set_device_key(key);
  r.set_job_id(job);
  r.set_priority(priority);
  *r.mutable_workload() = small_matmul();
  r.mutable_options()->set_timeout_s(1);
  v1::Artifact artifact;
  artifact.set_format(v1::Artifact::SHARED_OBJECT);
  artifact.set_data("not really an object");
  artifact.set_entry_symbol("entry");
  artifact.add_args()->set_name("A");
  for (int i = 0; i < n; ++i) {
    auto* c = r.add_candidates();
    c->set_id(first_id + static_cast<uint64_t>(i));
    *c->mutable_artifact() = artifact;
  }
  return r;
}

inline v1::AgentMessage result_for(const v1::LeasedBatch& batch, int i, v1::ErrorCode code = v1::OK) {
  v1::AgentMessage m;
  auto* r = m.mutable_result();
  r->set_lease_id(batch.lease_id());
  r->set_candidate_id(batch.candidates(i).id());
  r->mutable_result()->set_error(code);
  if (code == v1::OK) r->mutable_result()->add_costs(1e-3);
  return m;
}

inline v1::AgentMessage done(const v1::LeasedBatch& batch) {
  v1::AgentMessage m;
  m.mutable_batch_done()->set_lease_id(batch.lease_id());
  return m;
}

}  // namespace tunefarm::testing
