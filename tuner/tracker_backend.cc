#include "tuner/tracker_backend.h"

#include <condition_variable>
#include <functional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "common/wire/credentials.h"
#include "common/wire/wire.h"
#include "tunefarm/v1/tracker.grpc.pb.h"

namespace tunefarm {
namespace {

// Codes after which sending the same request again can succeed.
bool transient(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::ABORTED || code == grpc::StatusCode::CANCELLED ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED || code == grpc::StatusCode::UNKNOWN;
}

// While a batch is out, asks the tracker every few seconds whether the key still has agents: a
// tracker holds the batch of a key whose agents are all gone for its --no-agent-timeout-s before
// it answers, and the job should say at once what it waits for.
class AgentWatch {
 public:
  AgentWatch(const std::shared_ptr<grpc::Channel>& channel, const TrackerBackendOptions& options,
             std::function<void(const std::string&)> waiting)
      : thread_([this, channel, options, waiting = std::move(waiting)] {
          bool said = false;
          std::unique_lock<std::mutex> lock(mu_);
          while (!done_.wait_for(lock, std::chrono::seconds(2), [this] { return stopped_; })) {
            lock.unlock();
            int agents = -1;  // Unknown: the tracker did not answer (the call says so itself).
            if (auto farm = farm_status(channel, options.token); farm.ok()) {
              agents = 0;
              for (const auto& key : farm->keys())
                if (key.device_key() == options.device_key) agents = key.agents_total();
            }
            if (agents == 0 && !said)
              waiting(fmt::format("waiting for an agent of key '{}' (none is connected to the tracker)",
                                  options.device_key));
            else if (agents > 0 && said)
              waiting("");
            if (agents >= 0) said = agents == 0;
            lock.lock();
          }
          if (said) waiting("");
        }) {}
  ~AgentWatch() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
    }
    done_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable done_;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace

TrackerMeasureBackend::TrackerMeasureBackend(std::shared_ptr<grpc::Channel> channel, TrackerBackendOptions options)
    : channel_(std::move(channel)), options_(std::move(options)) {}

TrackerMeasureBackend::~TrackerMeasureBackend() = default;

Status TrackerMeasureBackend::measure(const v1::Workload& workload, const v1::MeasureOptions& options,
                                      const v1::Artifact* reference, std::span<const v1::Artifact> candidates,
                                      const ResultFn& on_result) {
  auto stub = v1::Tracker::NewStub(channel_);
  std::vector<bool> done(candidates.size(), false);
  size_t remaining = candidates.size();
  auto give_up_at = std::chrono::steady_clock::now() + options_.retry_budget;
  auto backoff = std::chrono::milliseconds(200);
  std::string waiting_for;  // What the batch waits for now; empty while results come.

  while (remaining > 0) {
    v1::MeasureRequest request;
    request.set_device_key(options_.device_key);
    request.set_priority(options_.priority);
    request.set_job_id(options_.job_id);
    request.set_token(options_.token);
    *request.mutable_workload() = workload;
    *request.mutable_options() = options;
    if (reference) *request.mutable_reference() = *reference;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (done[i]) continue;
      auto* c = request.add_candidates();
      c->set_id(i);
      *c->mutable_artifact() = candidates[i];
    }

    grpc::ClientContext context;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return Status(StatusCode::kCancelled, "the batch was cancelled");
      context_ = &context;
    }
    // The call lives as long as the batch may take: every candidate's timeout in turn, plus slack
    // for queueing behind other tuners.
    double per_candidate = options.timeout_s() > 0 ? options.timeout_s() : 10.0;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(static_cast<int64_t>(1000 * (60 + per_candidate * remaining * 2))));
    // In the metadata too, where trackerd checks it before it reads the request.
    add_bearer(context, options_.token);
    auto reader = stub->Measure(&context, request);
    {
      AgentWatch watch(channel_, options_, [this](const std::string& why) { waiting(why); });
      v1::MeasureResponse response;
      while (reader->Read(&response)) {
        uint64_t id = response.candidate_id();
        if (id >= candidates.size() || done[id]) continue;  // Not ours, or a duplicate.
        done[id] = true;
        --remaining;
        // Results come again: the wait, if any, is over and its clock starts afresh.
        give_up_at = std::chrono::steady_clock::now() + options_.retry_budget;
        backoff = std::chrono::milliseconds(200);
        if (!waiting_for.empty()) {
          waiting_for.clear();
          waiting("");
        }
        on_result(id, response.result());
      }
    }
    grpc::Status status = reader->Finish();
    {
      std::lock_guard<std::mutex> lock(mu_);
      context_ = nullptr;
      if (cancelled_ && remaining > 0) return Status(StatusCode::kCancelled, "the batch was cancelled");
    }
    if (remaining == 0) break;
    // A tracker that knows no agent of the key may have just restarted: its agents come back.
    bool no_agent = status.error_code() == grpc::StatusCode::NOT_FOUND;
    if (!status.ok() && !no_agent && !transient(status.error_code()))
      return from_grpc(status).with_context("tracker");
    std::string why = no_agent  ? fmt::format("an agent of key '{}' at the tracker ({})", options_.device_key,
                                              status.error_message())
                      : status.ok() ? "the tracker, which ended the batch early"
                                    : fmt::format("the tracker at {} ({})", options_.tracker_address,
                                                  status.error_message());
    if (std::chrono::steady_clock::now() + backoff > give_up_at)
      return unavailable(fmt::format("waited {} s without a result for {}; the job's limit is --max-wait (resume "
                                     "the job when the farm is back)",
                                     std::chrono::duration_cast<std::chrono::seconds>(options_.retry_budget).count(),
                                     why));
    if (why != waiting_for) {
      spdlog::warn("job {}: {} candidates without results; waiting for {}", options_.job_id, remaining, why);
      waiting_for = why;
      waiting("waiting for " + why);
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
  if (!waiting_for.empty()) waiting("");
  return Status();
}

void TrackerMeasureBackend::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (context_) context_->TryCancel();
}

StatusOr<v1::QueueStatusResponse> farm_status(const std::shared_ptr<grpc::Channel>& channel, const std::string& token) {
  auto stub = v1::Tracker::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  add_bearer(context, token);
  v1::QueueStatusRequest request;
  v1::QueueStatusResponse response;
  grpc::Status status = stub->QueueStatus(&context, request, &response);
  if (!status.ok())
    return unavailable(fmt::format("cannot reach the tracker: {}{}", status.error_message(),
                                   unreachable_hint(status.error_message(), "tunerd --tracker-ca")));
  return response;
}

StatusOr<std::vector<AgentPlatform>> check_device_key(const std::shared_ptr<grpc::Channel>& channel,
                                                      const std::string& device_key, const std::string& token) {
  auto status = farm_status(channel, token);
  if (!status.ok())
    return unavailable(fmt::format("cannot ask the tracker which device keys exist: {}", status.status().message()));
  const v1::QueueStatusResponse& response = *status;
  std::string known;
  for (const auto& key : response.keys()) {
    if (key.device_key() == device_key && key.agents_total() > 0) {
      std::vector<AgentPlatform> agents;
      for (const v1::AgentInfo& agent : key.agents()) agents.push_back(agent_platform(agent));
      return agents;
    }
    if (key.agents_total() > 0) known += (known.empty() ? "" : ", ") + key.device_key();
  }
  return invalid_argument(fmt::format("unknown device key '{}': no agent serves it (the tracker has agents for: {})",
                                      device_key, known.empty() ? "none" : known));
}

}  // namespace tunefarm
