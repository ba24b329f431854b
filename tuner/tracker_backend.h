// Measures candidates on the farm: one Tracker.Measure call per batch, results streamed back as
// agents finish them. When the tracker is unreachable, restarts mid-batch, or knows no agent of
// the key yet (a restarted tracker before its agents came back), the candidates still without a
// result are sent again (with backoff), saying so through on_wait(), until `retry_budget` passes
// without a result; the batch is then UNAVAILABLE, naming what it waited for. Requests the tracker
// refuses otherwise (a malformed batch, a bad token) are an error of the whole batch.
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
  // How long a batch may wait without any result for the tracker and an agent of the key.
  std::chrono::milliseconds retry_budget{std::chrono::minutes(60)};
  std::string tracker_address;  // For messages.
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
