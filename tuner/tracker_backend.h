// Measures candidates on the farm: one Tracker.Measure call per batch, results streamed back as
// agents finish them. When the tracker is unreachable or restarts mid-batch, the candidates still
// without a result are sent again (with backoff) until `retry_budget` runs out; only then do they
// come back as DEVICE_LOST. Requests the tracker refuses (an unknown device key, a malformed
// batch) are an error of the whole batch.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/platform.h"
#include "search/tuning_loop.h"
#include "tunefarm/v1/tracker.pb.h"

namespace grpc {
class Channel;
class ClientContext;
}

namespace tunefarm {

struct TrackerBackendOptions {
  std::string token;  // Tuner token the tracker asks for; empty when it asks for none.
  std::string device_key;
  std::string job_id;
  int priority = 0;
  std::chrono::seconds retry_budget{120};
};

class TrackerMeasureBackend : public MeasureBackend {
 public:
  TrackerMeasureBackend(std::shared_ptr<grpc::Channel> channel, TrackerBackendOptions options);
  ~TrackerMeasureBackend() override;

  Status measure(const v1::Workload& workload, const v1::MeasureOptions& options, const v1::Artifact* reference,
                 std::span<const v1::Artifact> candidates, const ResultFn& on_result) override;
  bool shares_host_cpu() const override { return false; }
  // Cancels the Measure call in flight: the tracker drops the candidates still queued.
  void cancel() override;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  TrackerBackendOptions options_;
  std::mutex mu_;
  bool cancelled_ = false;                   // Guarded by mu_.
  grpc::ClientContext* context_ = nullptr;   // The call in flight; guarded by mu_.
};

// The tracker's queue status of every device key (agents, queues); UNAVAILABLE when it cannot be
// reached. `token` is the tuner token, which the tracker asks for when its tokens are on.
StatusOr<v1::QueueStatusResponse> farm_status(const std::shared_ptr<grpc::Channel>& channel, const std::string& token);

// What each agent the tracker has for `device_key` can run (at least one agent); INVALID_ARGUMENT
// naming the keys it does have otherwise; UNAVAILABLE when the tracker cannot be reached.
// `token` is the tuner token, which the tracker asks for when its tokens are on.
StatusOr<std::vector<AgentPlatform>> check_device_key(const std::shared_ptr<grpc::Channel>& channel,
                                                      const std::string& device_key, const std::string& token);

}  // namespace tunefarm
