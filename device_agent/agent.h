// The device agent's session with a tracker: it dials out (so boards behind NAT need no open
// port), says hello with its device key and capabilities, sends heartbeats, measures the batches it
// is leased and streams one result per candidate as each finishes. When the stream breaks (the
// tracker restarted, the network blinked) it dials again with exponential backoff.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/blocking_queue.h"
#include "common/status.h"
#include "tunefarm/v1/tracker.pb.h"

namespace grpc {
class Channel;
class ChannelCredentials;
class ClientContext;
}

namespace tunefarm {

struct AgentOptions {
  std::string tracker = "127.0.0.1:9190";
  std::string device_key = "local-cpu";
  std::string agent_id;   // Empty: hostname-pid.
  std::string token;
  // How to dial the tracker (TLS, a client certificate); null dials plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::chrono::milliseconds min_backoff{100};
  std::chrono::milliseconds max_backoff{2000};
  // Whether this agent can measure at all (its workers start); null: always. Asked after each
  // candidate that failed, and, once it has said no, every `recheck` (it may run a probe kernel).
  // While it says no the agent holds no session, so that the tracker hands its leases to other
  // agents instead of to one that fails them all; it dials again once it says yes.
  std::function<Status()> can_measure;
  std::chrono::milliseconds recheck{5000};
};

// Measures one candidate of a leased batch. The agent passes the Measurer; the tracker bench
// passes an instant stand-in.
using CandidateMeasurer = std::function<v1::MeasureResult(const v1::LeasedBatch& batch, const v1::Candidate& candidate)>;

// What this machine offers, for the hello: architecture, targets, cores, CPU model and LLVM's name
// and features of it, memory, GPU name.
v1::Capabilities local_capabilities();
std::string default_agent_id();

class DeviceAgent {
 public:
  DeviceAgent(AgentOptions options, v1::Capabilities capabilities, CandidateMeasurer measure);
  ~DeviceAgent();

  // Serves until stop(). Returns OK after stop(), or the tracker's reason when it refuses this
  // agent for good (a malformed hello, a wrong token).
  Status run();
  void stop();

  // Sessions opened so far (1 + reconnections); for tests and logs.
  int sessions() const { return sessions_.load(); }
  // Whether can_measure said no last time it was asked.
  bool unfit() const { return unfit_.load(); }

 private:
  // One session: hello, then serve until the stream ends; the status says how it ended.
  Status serve_once();
  class Session;
  // A leased batch on its way to the measurement thread, with the session it came in.
  struct Work {
    v1::LeasedBatch batch;
    std::shared_ptr<Session> session;
  };
  // The measurement thread: one for the agent's life, so that a session ending in the middle of
  // a long candidate does not hold up the next hello.
  void measure_loop();
  void run_batch(const v1::LeasedBatch& batch, Session& session);
  // Asks can_measure and logs when the answer changes; true when this agent can measure.
  bool check_fit();
  // Ends the current session (stop() without stopping).
  void leave_session();

  AgentOptions options_;
  v1::Capabilities capabilities_;
  CandidateMeasurer measure_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<BlockingQueue<Work>> work_;
  std::mutex lease_mu_;
  std::string current_lease_;  // The lease being measured, for heartbeats.
  std::atomic<bool> stopping_{false};
  std::atomic<int> sessions_{0};
  std::atomic<bool> unfit_{false};
  // Held while measuring or asking can_measure: a measurer serves one caller at a time.
  std::mutex measuring_mu_;
  std::mutex context_mu_;
  grpc::ClientContext* context_ = nullptr;  // The current session's, so that stop() can cancel it.
};

}  // namespace tunefarm
