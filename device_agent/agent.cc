#include "device_agent/agent.h"

#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "common/cpu_detect.h"
#include "common/platform.h"
#include "common/wire/credentials.h"
#include "common/wire/wire.h"
#include "measure/cuda_runner.h"
#include "measure/stream_speed.h"
#include "tunefarm/v1/tracker.grpc.pb.h"

namespace tunefarm {
namespace {

using Stream = grpc::ClientReaderWriter<v1::AgentMessage, v1::TrackerMessage>;

int64_t unix_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("model name")) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

}  // namespace

// One session's stream as the measurement and heartbeat threads see it: writes are serialised (a
// gRPC stream takes one writer at a time) and refused once the session is closed, after which the
// stream may be destroyed.
class DeviceAgent::Session {
 public:
  explicit Session(Stream* stream) : stream_(stream) {}

  bool write(const v1::AgentMessage& message) {
    std::lock_guard<std::mutex> lock(mu_);
    return !closed_ && stream_->Write(message);
  }

  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    wake_.notify_all();
  }

  bool closed() {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }

  // Sleeps up to `wait`; false (at once) when the session closes.
  bool sleep(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu_);
    return !wake_.wait_for(lock, wait, [this] { return closed_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable wake_;
  Stream* stream_;
  bool closed_ = false;
};

std::string default_agent_id() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || !*host) std::snprintf(host, sizeof host, "agent");
  return fmt::format("{}-{}", host, getpid());
}

v1::Capabilities local_capabilities() {
  v1::Capabilities caps;
  caps.set_arch(host_arch());
  caps.add_targets("llvm");
  caps.set_num_cores(static_cast<int32_t>(std::thread::hardware_concurrency()));
  caps.set_cpu_model(cpu_model());
  CpuDescription cpu = host_cpu();
  caps.set_cpu_name(cpu.name);
  caps.set_cpu_features(cpu.features);
  caps.set_memory_bytes(static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE));
  caps.set_stream_bytes_per_s(measure_stream_bytes_per_s());
  if (auto gpu = cuda_device_name(); gpu.ok()) {
    caps.add_targets("cuda");
    caps.set_gpu_name(*gpu);
  }
  caps.set_version(TUNEFARM_VERSION);
  return caps;
}

DeviceAgent::DeviceAgent(AgentOptions options, v1::Capabilities capabilities, CandidateMeasurer measure)
    : options_(std::move(options)), capabilities_(std::move(capabilities)), measure_(std::move(measure)) {
  if (options_.agent_id.empty()) options_.agent_id = default_agent_id();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  // gRPC's own reconnect backoff grows to minutes; a restarted tracker must see its agents in seconds.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(options_.min_backoff.count()));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(options_.min_backoff.count()));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options_.max_backoff.count()));
  // Each agent its own connection: the bench runs many agents in one process.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto credentials = options_.credentials ? options_.credentials : grpc::InsecureChannelCredentials();
  channel_ = grpc::CreateCustomChannel(options_.tracker, credentials, args);
}

DeviceAgent::~DeviceAgent() = default;

void DeviceAgent::stop() {
  stopping_ = true;
  leave_session();
}

void DeviceAgent::leave_session() {
  std::lock_guard<std::mutex> lock(context_mu_);
  if (context_) context_->TryCancel();
}

bool DeviceAgent::check_fit() {
  if (!options_.can_measure) return true;
  Status fit;
  {
    std::lock_guard<std::mutex> lock(measuring_mu_);
    fit = options_.can_measure();
  }
  if (!fit.ok() && !unfit_)
    spdlog::error("this agent cannot measure: {}; it leaves the tracker and checks again every {} ms", fit.message(),
                  options_.recheck.count());
  if (fit.ok() && unfit_) spdlog::info("this agent can measure again; dialling {}", options_.tracker);
  unfit_ = !fit.ok();
  return fit.ok();
}

Status DeviceAgent::run() {
  work_ = std::make_unique<BlockingQueue<Work>>();
  std::thread measurer([this] { measure_loop(); });
  Status outcome = Status();
  auto backoff = options_.min_backoff;
  while (!stopping_) {
    if (unfit_) {
      constexpr std::chrono::milliseconds kTick{20};
      for (auto waited = kTick; waited < options_.recheck && !stopping_; waited += kTick)
        std::this_thread::sleep_for(kTick);
      if (!stopping_) check_fit();
      continue;
    }
    int before = sessions_.load();
    Status s = serve_once();
    if (stopping_) break;
    if (s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kUnauthenticated ||
        s.code() == StatusCode::kPermissionDenied || s.code() == StatusCode::kAlreadyExists) {
      outcome = s;
      break;
    }
    // The address answers gRPC but has no tracker service: most likely tunerd's port.
    if (s.code() == StatusCode::kUnimplemented) {
      outcome = failed_precondition(fmt::format("{} is not a tracker (it does not serve the agent session; is it "
                                                "tunerd's address?)",
                                                options_.tracker));
      break;
    }
    // A session that got as far as its ack resets the backoff: the tracker was there.
    if (sessions_.load() != before) backoff = options_.min_backoff;
    spdlog::info("session ended ({}); dialling {} again in {} ms", s.ok() ? "closed" : s.to_string(), options_.tracker,
                 backoff.count());
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  // Batches still queued belong to sessions that have ended: the tracker requeues them.
  work_->close(BlockingQueue<Work>::Close::kDiscard);
  measurer.join();
  return outcome;
}

void DeviceAgent::measure_loop() {
  Work item;
  while (work_->pop(item) == BlockingQueue<Work>::Pop::kItem) {
    // Batches of a session that has ended were requeued by the tracker already.
    if (item.session->closed()) continue;
    {
      std::lock_guard<std::mutex> lock(lease_mu_);
      current_lease_ = item.batch.lease_id();
    }
    run_batch(item.batch, *item.session);
    std::lock_guard<std::mutex> lock(lease_mu_);
    current_lease_.clear();
    item = Work();
  }
}

Status DeviceAgent::serve_once() {
  // Without this wait a call fails at once while the channel sits in its reconnect backoff, and
  // connection attempts are abandoned with it.
  if (!channel_->WaitForConnected(std::chrono::system_clock::now() + options_.max_backoff))
    return unavailable(fmt::format("cannot reach the tracker at {}{}", options_.tracker, unreachable_hint("", "--tls-ca")));
  grpc::ClientContext context;
  {
    std::lock_guard<std::mutex> lock(context_mu_);
    if (stopping_) return Status();
    context_ = &context;
  }
  auto forget_context = [this] {
    std::lock_guard<std::mutex> lock(context_mu_);
    context_ = nullptr;
  };
  // The token goes in the call's metadata, which trackerd checks before it reads anything, and in
  // the hello, which its Broker checks.
  add_bearer(context, options_.token);
  auto stub = v1::Tracker::NewStub(channel_);
  std::unique_ptr<Stream> stream = stub->AgentSession(&context);
  v1::AgentMessage hello;
  hello.mutable_hello()->set_agent_id(options_.agent_id);
  hello.mutable_hello()->set_device_key(options_.device_key);
  hello.mutable_hello()->set_token(options_.token);
  *hello.mutable_hello()->mutable_capabilities() = capabilities_;
  v1::TrackerMessage first;
  bool answered = stream->Write(hello) && stream->Read(&first);
  if (!answered || !first.has_hello_ack()) {
    if (first.has_goodbye()) {
      // The tracker ends the call itself, with the status that says why.
      spdlog::warn("the tracker refused this agent: {}", first.goodbye().reason());
      while (stream->Read(&first)) {
      }
    } else if (answered) {
      context.TryCancel();
    }
    Status s = from_grpc(stream->Finish());
    forget_context();
    return s.ok() ? unavailable("the tracker did not acknowledge the hello") : s;
  }
  ++sessions_;
  spdlog::info("agent '{}' serving key '{}' for {} (session {})", options_.agent_id, options_.device_key,
               options_.tracker, first.hello_ack().session_id());
  auto interval = std::chrono::milliseconds(std::max(50, first.hello_ack().heartbeat_interval_ms()));

  auto session = std::make_shared<Session>(stream.get());
  std::thread heartbeat([&] {
    while (session->sleep(interval)) {
      v1::AgentMessage beat;
      beat.mutable_heartbeat()->set_sent_at_us(unix_us());
      {
        std::lock_guard<std::mutex> lock(lease_mu_);
        beat.mutable_heartbeat()->set_lease_id(current_lease_);
      }
      if (!session->write(beat)) return;
    }
  });
  v1::TrackerMessage message;
  while (stream->Read(&message)) {
    if (message.has_batch()) work_->push({std::move(*message.mutable_batch()), session});
    else if (message.has_goodbye()) spdlog::warn("the tracker ends this session: {}", message.goodbye().reason());
  }
  // After close() no thread writes to the stream, so it may be finished and destroyed.
  session->close();
  heartbeat.join();
  Status s = from_grpc(stream->Finish());
  forget_context();
  return s;
}

void DeviceAgent::run_batch(const v1::LeasedBatch& batch, Session& session) {
  spdlog::debug("lease {}: {} candidates of {}", batch.lease_id(), batch.candidates_size(), batch.workload().op());
  for (const auto& candidate : batch.candidates()) {
    // The session is over: the tracker has requeued what is left.
    if (session.closed()) return;
    // Past the deadline the tracker has taken the lease back; say so rather than work for nothing.
    if (batch.deadline_us() > 0 && unix_us() > batch.deadline_us()) break;
    v1::AgentMessage message;
    auto* result = message.mutable_result();
    result->set_lease_id(batch.lease_id());
    result->set_candidate_id(candidate.id());
    {
      std::lock_guard<std::mutex> lock(measuring_mu_);
      *result->mutable_result() = measure_(batch, candidate);
    }
    // A failure may be this agent's, not the candidate's: then it is not reported, and the session
    // ends, so that the tracker gives the batch to another agent.
    if (result->result().error() != v1::OK && !check_fit()) {
      leave_session();
      return;
    }
    result->mutable_result()->set_agent_id(options_.agent_id);
    spdlog::debug("lease {}: candidate {} -> {}", batch.lease_id(), candidate.id(),
                  v1::ErrorCode_Name(result->result().error()));
    if (!session.write(message)) return;
  }
  v1::AgentMessage done;
  done.mutable_batch_done()->set_lease_id(batch.lease_id());
  session.write(done);
}

}  // namespace tunefarm
