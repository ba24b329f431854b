// The tracker's brain, free of any network code: the registry of agent sessions and, per device
// key, the free agents and a priority queue of pending measurement requests (priority first, then
// round-robin between the jobs of one priority, then arrival). A free agent gets a lease on a chunk
// of one request, with a deadline derived from the request's timeouts. When the agent's session
// ends or the lease expires, its unanswered candidates go back to the queue for another agent;
// after max_attempts they are answered DEVICE_LOST. Every accepted request ends with exactly one
// result per candidate.
//
// The service (service.cc) drives a Broker from gRPC streams; unit tests drive it directly. All
// methods are thread-safe; the channels are called with the broker's lock held and must not block.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "tunefarm/v1/tracker.pb.h"

namespace tunefarm {

class TrackerMetrics;

using BrokerClock = std::chrono::steady_clock;
using SessionId = uint64_t;
using RequestId = uint64_t;

struct BrokerOptions {
  int max_lease_candidates = 8;       // Largest chunk of a request leased to one agent at once.
  // Smallest chunk while a request has that many pending: a lease costs a round trip and two
  // messages, which outweigh spreading a few candidates over more agents.
  int min_lease_candidates = 4;
  int max_attempts = 3;               // Agents a candidate may be lost on before it is DEVICE_LOST.
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{5000};   // Silence after which an agent is dropped.
  std::chrono::milliseconds lease_grace{5000};         // Added to a lease's summed timeouts.
  std::chrono::milliseconds no_agent_timeout{30000};   // How long requests wait for a key with no agent.
  int64_t max_artifact_bytes = int64_t{64} << 20;
  int max_candidates = 4096;          // Per request.
  std::string agent_token;            // Required in hellos when not empty.
  std::string tuner_token;            // Required in Measure requests when not empty.
  // With tokens on, listing the farm (ListDevices, QueueStatus) takes the tuner token or one of
  // these, presented as "authorization: Bearer <token>": the inventory is not for anyone with a
  // certificate.
  std::vector<std::string> reader_tokens;
  std::function<BrokerClock::time_point()> clock = [] { return BrokerClock::now(); };
  // Counts leases, requeues, results and dispatch waits as they happen; null: none.
  std::shared_ptr<TrackerMetrics> metrics;
};

// The way down to one agent (its session stream).
class AgentChannel {
 public:
  virtual ~AgentChannel() = default;
  virtual void send_batch(v1::LeasedBatch batch) = 0;
  // Ends the session, telling the agent why.
  virtual void close(const Status& why) = 0;
};

// The way back to one tuner (its Measure stream).
class TunerChannel {
 public:
  virtual ~TunerChannel() = default;
  virtual void send_result(v1::MeasureResponse response) = 0;
  // Every candidate has its result.
  virtual void finish() = 0;
};

// Checks a Measure request as the broker will accept it; errors name the field or candidate.
Status validate_measure_request(const v1::MeasureRequest& request, const BrokerOptions& options);
// Checks a hello: ids and keys are 1..128 characters of [A-Za-z0-9._:@-].
Status validate_hello(const v1::AgentHello& hello, const BrokerOptions& options);
// Checks the device key that narrows ListDevices and QueueStatus: empty (all keys) or a key.
Status validate_key_filter(const std::string& device_key);

class Broker {
 public:
  explicit Broker(BrokerOptions options = {});
  ~Broker();

  // A new agent session. A session with the same agent id is replaced (its agent reconnected).
  StatusOr<v1::HelloAck> open_session(const v1::AgentHello& hello, std::string peer,
                                      std::shared_ptr<AgentChannel> channel, SessionId& session);
  // A message after the hello. Non-OK means the agent broke the protocol; the caller ends the
  // session with that status.
  Status on_agent_message(SessionId session, const v1::AgentMessage& message);
  // The session ended (stream broken or closed); its lease is requeued.
  void close_session(SessionId session, const std::string& reason);

  // Queues a request. NOT_FOUND for a device key no agent ever served, UNAVAILABLE while draining.
  StatusOr<RequestId> submit(v1::MeasureRequest request, std::shared_ptr<TunerChannel> channel);
  // The tuner went away: its queued candidates are dropped and late results discarded.
  void cancel(RequestId request);

  // Expires leases, drops silent agents and fails requests whose key has had no agent for too
  // long. The service calls it a few times per second.
  void tick();

  // Shutdown: refuse new requests, then wait for idle(), then fail_all and close_all_sessions.
  void begin_drain();
  bool idle() const;
  void fail_all(const std::string& reason);
  void close_all_sessions(const Status& why);

  v1::QueueStatusResponse queue_status(const std::string& device_key) const;
  v1::ListDevicesResponse list_devices(const std::string& device_key) const;
  const BrokerOptions& options() const { return options_; }

 private:
  struct Candidate {
    int attempts = 0;
    bool answered = false;
    std::string lease_id;  // The lease holding it now; empty when pending or answered.
    BrokerClock::time_point queued_at;  // When it last joined the queue, for the dispatch wait.
  };
  struct Request {
    RequestId id = 0;
    v1::MeasureRequest proto;
    std::shared_ptr<TunerChannel> channel;
    std::vector<Candidate> candidates;
    std::deque<int> pending;   // Indexes waiting for an agent, oldest first.
    int unanswered = 0;
    bool queued = false;
    double candidate_budget_s = 0;  // Per-candidate time a lease allows.
  };
  struct Lease {
    std::string id;
    SessionId agent = 0;
    RequestId request = 0;
    std::vector<int> open;     // Candidate indexes not answered yet.
    BrokerClock::time_point deadline;
  };
  struct Agent {
    SessionId id = 0;
    v1::AgentHello hello;
    std::string peer;
    std::shared_ptr<AgentChannel> channel;
    BrokerClock::time_point connected, last_seen;
    int64_t batches_done = 0;
    std::string last_error;
    std::string lease_id;      // Current lease; empty when free.
    std::string stale_lease;   // An expired lease the agent still works on; busy until its BatchDone.
  };
  // Requests of one priority: jobs take turns, each job's requests in arrival order.
  struct Level {
    std::deque<std::string> job_order;
    std::unordered_map<std::string, std::deque<RequestId>> jobs;
  };
  struct Key {
    std::deque<SessionId> free_agents;
    int agents = 0;
    std::map<int, Level, std::greater<int>> queue;
    BrokerClock::time_point empty_since;
  };

  void enqueue_locked(Request& request, bool at_front);
  void dispatch_locked(const std::string& key);
  RequestId next_request_locked(Key& key);
  void deliver_locked(Request& request, int index, v1::MeasureResult result);
  void requeue_locked(Lease& lease, const std::string& reason);
  void end_lease_locked(const std::string& lease_id);
  void close_session_locked(SessionId session, const std::string& reason);
  void remove_free_agent_locked(Agent& agent);
  void finish_request_locked(RequestId id);
  v1::AgentInfo agent_info_locked(const Agent& agent) const;
  int64_t pending_candidates_locked(const Key& key, int* batches) const;

  BrokerOptions options_;
  mutable std::mutex mu_;
  bool draining_ = false;
  uint64_t next_id_ = 1;
  std::unordered_map<SessionId, Agent> agents_;
  std::unordered_map<std::string, SessionId> agent_ids_;
  std::unordered_map<RequestId, Request> requests_;
  std::unordered_map<std::string, Lease> leases_;
  std::map<std::string, Key> keys_;
};

}  // namespace tunefarm
