#include "tracker/broker.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/cpu_detect.h"
#include "common/wire/credentials.h"
#include "common/wire/wire.h"
#include "measure/measure_options.h"
#include "tracker/metrics.h"

namespace tunefarm {
namespace {

constexpr size_t kMaxNameLength = 128;

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == ':' || c == '@' || c == '-';
  });
}

Status check_artifact(const v1::Artifact& artifact, const std::string& what, int64_t max_bytes) {
  if (artifact.format() != v1::Artifact::SHARED_OBJECT && artifact.format() != v1::Artifact::PTX)
    return invalid_argument(fmt::format("{} has no known format (SHARED_OBJECT or PTX)", what));
  if (artifact.data().empty()) return invalid_argument(fmt::format("{} is empty", what));
  if (static_cast<int64_t>(artifact.data().size()) > max_bytes)
    return invalid_argument(fmt::format("{} is {} bytes, over the tracker's limit of {} bytes", what,
                                        artifact.data().size(), max_bytes));
  if (artifact.entry_symbol().empty()) return invalid_argument(fmt::format("{} names no entry symbol", what));
  if (artifact.args().empty()) return invalid_argument(fmt::format("{} declares no tensor arguments", what));
  return Status();
}

int64_t unix_us(BrokerClock::time_point when, BrokerClock::time_point now) {
  auto system_now = std::chrono::system_clock::now();
  return std::chrono::duration_cast<std::chrono::microseconds>(system_now.time_since_epoch() + (when - now)).count();
}

v1::MeasureResult lost(const std::string& why, int attempts) {
  v1::MeasureResult result;
  result.set_error(v1::DEVICE_LOST);
  result.set_error_msg(why);
  result.set_attempts(attempts);
  return result;
}

}  // namespace

Status validate_hello(const v1::AgentHello& hello, const BrokerOptions& options) {
  if (!options.agent_token.empty() && !same_secret(hello.token(), options.agent_token))
    return {StatusCode::kUnauthenticated, "the agent token is missing or wrong"};
  if (!valid_name(hello.agent_id()))
    return invalid_argument(fmt::format("hello: agent_id '{}' must be 1..{} characters of [A-Za-z0-9._:@-]",
                                        hello.agent_id().substr(0, kMaxNameLength), kMaxNameLength));
  if (!valid_name(hello.device_key()))
    return invalid_argument(fmt::format("hello: device_key '{}' must be 1..{} characters of [A-Za-z0-9._:@-]",
                                        hello.device_key().substr(0, kMaxNameLength), kMaxNameLength));
  // tunerd matches it against targets and tune-client prints it; empty is an agent too old to say.
  const std::string& arch = hello.capabilities().arch();
  if (!arch.empty() && !valid_name(arch))
    return invalid_argument(
        fmt::format("hello: capabilities.arch '{}' must be empty or 1..{} characters of [A-Za-z0-9._:@-]",
                    arch.substr(0, kMaxNameLength), kMaxNameLength));
  // tunerd compiles for it; both empty is an agent too old to say.
  const v1::Capabilities& caps = hello.capabilities();
  if (!caps.cpu_name().empty() || !caps.cpu_features().empty())
    TF_RETURN_IF_ERROR(check_cpu_description({caps.cpu_name(), caps.cpu_features()}).with_context("hello: capabilities"));
  return Status();
}

Status validate_key_filter(const std::string& device_key) {
  if (device_key.empty() || valid_name(device_key)) return Status();
  return invalid_argument(fmt::format("device_key '{}' must be empty (all keys) or 1..{} characters of [A-Za-z0-9._:@-]",
                                      device_key.substr(0, kMaxNameLength), kMaxNameLength));
}

Status validate_measure_request(const v1::MeasureRequest& request, const BrokerOptions& options) {
  if (!options.tuner_token.empty() && !same_secret(request.token(), options.tuner_token))
    return {StatusCode::kUnauthenticated, "the tuner token is missing or wrong"};
  if (!valid_name(request.device_key()))
    return invalid_argument(fmt::format("device_key '{}' must be 1..{} characters of [A-Za-z0-9._:@-]",
                                        request.device_key().substr(0, kMaxNameLength), kMaxNameLength));
  if (request.job_id().size() > kMaxNameLength) return invalid_argument("job_id is longer than 128 characters");
  if (request.candidates().empty()) return invalid_argument("the request has no candidates");
  if (request.candidates_size() > options.max_candidates)
    return invalid_argument(fmt::format("the request has {} candidates, over the limit of {}",
                                        request.candidates_size(), options.max_candidates));
  if (auto workload = from_proto(request.workload()); !workload.ok())
    return workload.status().with_context("workload");
  const v1::MeasureOptions& o = request.options();
  if (o.number() < 0 || o.repeat() < 0 || o.min_repeat_ms() < 0 || o.timeout_s() < 0 || o.rtol() < 0 || o.atol() < 0)
    return invalid_argument("measure options must not be negative");
  if (o.timeout_s() > 3600) return invalid_argument("options.timeout_s is over one hour");
  if (o.check_correctness()) {
    if (!request.has_reference()) return invalid_argument("check_correctness is set but there is no reference artifact");
    TF_RETURN_IF_ERROR(check_artifact(request.reference(), "the reference artifact", options.max_artifact_bytes));
  }
  std::unordered_set<uint64_t> ids;
  for (const auto& c : request.candidates()) {
    if (!ids.insert(c.id()).second) return invalid_argument(fmt::format("candidate id {} appears twice", c.id()));
    TF_RETURN_IF_ERROR(check_artifact(c.artifact(), fmt::format("the artifact of candidate {}", c.id()),
                                      options.max_artifact_bytes));
  }
  return Status();
}

Broker::Broker(BrokerOptions options) : options_(std::move(options)) {}
Broker::~Broker() = default;

StatusOr<v1::HelloAck> Broker::open_session(const v1::AgentHello& hello, std::string peer,
                                            std::shared_ptr<AgentChannel> channel, SessionId& session) {
  TF_RETURN_IF_ERROR(validate_hello(hello, options_));
  std::lock_guard<std::mutex> lock(mu_);
  auto now = options_.clock();
  if (auto old = agent_ids_.find(hello.agent_id()); old != agent_ids_.end()) {
    SessionId old_session = old->second;
    const Agent& existing = agents_[old_session];
    // A live session keeps its id: two agents started with one --id would otherwise replace each
    // other forever. One that has gone silent is the same agent's broken stream, not yet noticed.
    if (now - existing.last_seen < options_.heartbeat_timeout)
      return Status(StatusCode::kAlreadyExists,
                    fmt::format("agent id '{}' is already connected (from {}, key '{}'); give each agent its own --id",
                                hello.agent_id(), existing.peer, existing.hello.device_key()));
    agents_[old_session].channel->close(failed_precondition("replaced by a newer session of the same agent id"));
    close_session_locked(old_session, "replaced by a newer session of the same agent id");
  }
  session = next_id_++;
  Agent& agent = agents_[session];
  agent.id = session;
  agent.hello = hello;
  agent.hello.clear_token();
  agent.peer = std::move(peer);
  agent.channel = std::move(channel);
  agent.connected = agent.last_seen = now;
  agent_ids_[hello.agent_id()] = session;
  Key& key = keys_[hello.device_key()];
  ++key.agents;
  key.free_agents.push_back(session);
  spdlog::info("agent '{}' ({}) joined key '{}'", hello.agent_id(), agent.peer, hello.device_key());
  v1::HelloAck ack;
  ack.set_session_id(fmt::format("s{}", session));
  ack.set_heartbeat_interval_ms(static_cast<int32_t>(options_.heartbeat_interval.count()));
  dispatch_locked(hello.device_key());
  return ack;
}

Status Broker::on_agent_message(SessionId session, const v1::AgentMessage& message) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(session);
  if (it == agents_.end()) return not_found("the session is closed");
  Agent& agent = it->second;
  agent.last_seen = options_.clock();
  switch (message.msg_case()) {
    case v1::AgentMessage::kHello:
      return failed_precondition("a second hello on an open session");
    case v1::AgentMessage::kHeartbeat:
      return Status();
    case v1::AgentMessage::kResult: {
      const v1::CandidateResult& r = message.result();
      auto lease_it = leases_.find(r.lease_id());
      // A result for a lease taken back already: its candidates went elsewhere; drop it.
      if (lease_it == leases_.end() || lease_it->second.agent != session) return Status();
      Lease& lease = lease_it->second;
      auto req_it = requests_.find(lease.request);
      const v1::MeasureRequest* proto = req_it == requests_.end() ? nullptr : &req_it->second.proto;
      int index = -1;
      if (proto) {
        for (int i : lease.open)
          if (proto->candidates(i).id() == r.candidate_id()) index = i;
      }
      auto open_it = std::find(lease.open.begin(), lease.open.end(), index);
      if (index < 0 || open_it == lease.open.end()) {
        if (!proto) return Status();  // The tuner went away; nothing to check against.
        bool in_request = false;
        for (const auto& c : proto->candidates()) in_request |= c.id() == r.candidate_id();
        // Answered already, or taken back and given to another agent: keep the first answer.
        if (in_request) return Status();
        return invalid_argument(
            fmt::format("result for candidate {}, which is not part of lease {}", r.candidate_id(), r.lease_id()));
      }
      lease.open.erase(open_it);
      if (r.result().error() != v1::OK) agent.last_error = r.result().error_msg();
      v1::MeasureResult result = r.result();
      result.set_agent_id(agent.hello.agent_id());
      deliver_locked(req_it->second, index, std::move(result));
      return Status();
    }
    case v1::AgentMessage::kBatchDone: {
      const std::string& lease_id = message.batch_done().lease_id();
      if (lease_id == agent.stale_lease) {
        agent.stale_lease.clear();
      } else if (lease_id == agent.lease_id) {
        auto lease_it = leases_.find(lease_id);
        if (lease_it != leases_.end() && !lease_it->second.open.empty())
          requeue_locked(lease_it->second, fmt::format("agent '{}' ended its lease without answering every candidate",
                                                       agent.hello.agent_id()));
        end_lease_locked(lease_id);
        agent.lease_id.clear();
        ++agent.batches_done;
      } else {
        return invalid_argument(fmt::format("batch_done for lease '{}', which this agent does not hold", lease_id));
      }
      if (agent.lease_id.empty() && agent.stale_lease.empty()) {
        keys_[agent.hello.device_key()].free_agents.push_back(session);
        dispatch_locked(agent.hello.device_key());
      }
      return Status();
    }
    case v1::AgentMessage::MSG_NOT_SET:
      break;
  }
  return invalid_argument("an agent message with no content");
}

void Broker::close_session(SessionId session, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  close_session_locked(session, reason);
}

void Broker::close_session_locked(SessionId session, const std::string& reason) {
  auto it = agents_.find(session);
  if (it == agents_.end()) return;
  Agent& agent = it->second;
  std::string key_name = agent.hello.device_key();
  spdlog::info("agent '{}' left key '{}': {}", agent.hello.agent_id(), key_name, reason);
  if (options_.metrics) options_.metrics->agent_lost(key_name);
  if (!agent.lease_id.empty()) {
    if (auto lease = leases_.find(agent.lease_id); lease != leases_.end())
      requeue_locked(lease->second, fmt::format("agent '{}' was lost: {}", agent.hello.agent_id(), reason));
    end_lease_locked(agent.lease_id);
  }
  remove_free_agent_locked(agent);
  Key& key = keys_[key_name];
  if (--key.agents == 0) key.empty_since = options_.clock();
  if (auto id = agent_ids_.find(agent.hello.agent_id()); id != agent_ids_.end() && id->second == session)
    agent_ids_.erase(id);
  agents_.erase(it);
  dispatch_locked(key_name);
}

void Broker::remove_free_agent_locked(Agent& agent) {
  auto& free = keys_[agent.hello.device_key()].free_agents;
  free.erase(std::remove(free.begin(), free.end(), agent.id), free.end());
}

StatusOr<RequestId> Broker::submit(v1::MeasureRequest proto, std::shared_ptr<TunerChannel> channel) {
  TF_RETURN_IF_ERROR(validate_measure_request(proto, options_));
  std::lock_guard<std::mutex> lock(mu_);
  if (draining_) return unavailable("the tracker is shutting down; retry on another tracker or later");
  auto key_it = keys_.find(proto.device_key());
  if (key_it == keys_.end()) {
    std::string known;
    for (const auto& [name, key] : keys_) known += (known.empty() ? "" : ", ") + name;
    return not_found(fmt::format("no agent serves device key '{}' (known keys: {})", proto.device_key(),
                                 known.empty() ? "none" : known));
  }
  RequestId id = next_id_++;
  Request& request = requests_[id];
  request.id = id;
  request.channel = std::move(channel);
  v1::MeasureOptions options = with_defaults(proto.options());
  // A lease allows each candidate its timeout, plus one for the reference run.
  request.candidate_budget_s = options.timeout_s();
  request.proto = std::move(proto);
  request.proto.clear_token();
  request.candidates.resize(request.proto.candidates_size());
  request.unanswered = request.proto.candidates_size();
  auto now = options_.clock();
  for (int i = 0; i < request.unanswered; ++i) {
    request.pending.push_back(i);
    request.candidates[i].queued_at = now;
  }
  enqueue_locked(request, false);
  dispatch_locked(request.proto.device_key());
  return id;
}

void Broker::cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  spdlog::info("request {} of job '{}' cancelled with {} candidates unanswered", id, it->second.proto.job_id(),
               it->second.unanswered);
  finish_request_locked(id);
}

void Broker::enqueue_locked(Request& request, bool at_front) {
  if (request.queued || request.pending.empty()) return;
  Level& level = keys_[request.proto.device_key()].queue[request.proto.priority()];
  auto [job, inserted] = level.jobs.try_emplace(request.proto.job_id());
  if (inserted) level.job_order.push_back(request.proto.job_id());
  if (at_front) job->second.push_front(request.id);
  else job->second.push_back(request.id);
  request.queued = true;
}

RequestId Broker::next_request_locked(Key& key) {
  while (!key.queue.empty()) {
    Level& level = key.queue.begin()->second;
    if (level.job_order.empty()) {
      key.queue.erase(key.queue.begin());
      continue;
    }
    std::string job = level.job_order.front();
    level.job_order.pop_front();
    auto& fifo = level.jobs[job];
    while (!fifo.empty()) {
      auto it = requests_.find(fifo.front());
      if (it != requests_.end() && !it->second.pending.empty()) break;
      if (it != requests_.end()) it->second.queued = false;
      fifo.pop_front();
    }
    if (fifo.empty()) {
      level.jobs.erase(job);
      continue;
    }
    // The job goes to the back of its priority's line: jobs of one priority take turns.
    level.job_order.push_back(job);
    return fifo.front();
  }
  return 0;
}

void Broker::dispatch_locked(const std::string& key_name) {
  auto key_it = keys_.find(key_name);
  if (key_it == keys_.end()) return;
  Key& key = key_it->second;
  auto now = options_.clock();
  while (!key.free_agents.empty()) {
    RequestId id = next_request_locked(key);
    if (id == 0) return;
    Request& request = requests_[id];
    SessionId session = key.free_agents.front();
    key.free_agents.pop_front();
    Agent& agent = agents_[session];

    // Spread a request over the free agents, in chunks of min..max_lease_candidates.
    int free_agents = static_cast<int>(key.free_agents.size()) + 1;
    int share = (static_cast<int>(request.pending.size()) + free_agents - 1) / free_agents;
    int take = std::clamp(share, std::max(1, options_.min_lease_candidates),
                          std::max(1, std::max(options_.min_lease_candidates, options_.max_lease_candidates)));

    Lease lease;
    lease.id = fmt::format("L{}", next_id_++);
    lease.agent = session;
    lease.request = id;
    v1::LeasedBatch batch;
    batch.set_lease_id(lease.id);
    *batch.mutable_workload() = request.proto.workload();
    *batch.mutable_options() = request.proto.options();
    if (request.proto.options().check_correctness()) *batch.mutable_reference() = request.proto.reference();
    for (int n = 0; n < take && !request.pending.empty(); ++n) {
      int index = request.pending.front();
      request.pending.pop_front();
      request.candidates[index].attempts++;
      request.candidates[index].lease_id = lease.id;
      if (options_.metrics)
        options_.metrics->dispatch_wait(key_name,
                                        std::chrono::duration<double>(now - request.candidates[index].queued_at).count());
      lease.open.push_back(index);
      *batch.add_candidates() = request.proto.candidates(index);
    }
    auto budget = std::chrono::duration<double>(request.candidate_budget_s * (static_cast<double>(lease.open.size()) + 1));
    lease.deadline = now + std::chrono::duration_cast<BrokerClock::duration>(budget) + options_.lease_grace;
    batch.set_deadline_us(unix_us(lease.deadline, now));
    if (request.pending.empty()) {
      // Leaves the job's line at the next pass; mark now so a requeue puts it back.
      request.queued = false;
      auto& level = key.queue[request.proto.priority()];
      auto& fifo = level.jobs[request.proto.job_id()];
      fifo.erase(std::remove(fifo.begin(), fifo.end(), id), fifo.end());
      if (fifo.empty()) {
        level.jobs.erase(request.proto.job_id());
        level.job_order.erase(std::remove(level.job_order.begin(), level.job_order.end(), request.proto.job_id()),
                              level.job_order.end());
      }
    }
    agent.lease_id = lease.id;
    if (options_.metrics) options_.metrics->lease(key_name, static_cast<int>(lease.open.size()));
    leases_[lease.id] = std::move(lease);
    spdlog::debug("lease {} of request {}: {} candidates to agent {}", batch.lease_id(), id, batch.candidates_size(), agent.hello.agent_id());
    agent.channel->send_batch(std::move(batch));
  }
}

void Broker::deliver_locked(Request& request, int index, v1::MeasureResult result) {
  Candidate& c = request.candidates[index];
  if (c.answered) return;
  c.answered = true;
  c.lease_id.clear();
  result.set_attempts(c.attempts);
  if (options_.metrics) options_.metrics->result(request.proto.device_key(), result.error());
  v1::MeasureResponse response;
  response.set_candidate_id(request.proto.candidates(index).id());
  *response.mutable_result() = std::move(result);
  request.channel->send_result(std::move(response));
  if (--request.unanswered == 0) {
    request.channel->finish();
    finish_request_locked(request.id);
  }
}

void Broker::finish_request_locked(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  // Queue entries of a finished request are skipped (and dropped) by next_request_locked.
  it->second.pending.clear();
  requests_.erase(it);
}

void Broker::requeue_locked(Lease& lease, const std::string& reason) {
  auto it = requests_.find(lease.request);
  std::vector<int> open;
  open.swap(lease.open);
  if (it == requests_.end()) return;
  Request& request = it->second;
  std::string key = request.proto.device_key();
  auto now = options_.clock();
  int requeued = 0;
  // Walk backwards so that push_front keeps the original order at the head of the line.
  for (auto i = open.rbegin(); i != open.rend(); ++i) {
    Candidate& c = request.candidates[*i];
    c.lease_id.clear();
    if (c.attempts >= options_.max_attempts) {
      deliver_locked(request, *i, lost(fmt::format("{} (tried on {} agents)", reason, c.attempts), c.attempts));
      if (requests_.find(lease.request) == requests_.end()) {
        if (options_.metrics && requeued > 0) options_.metrics->requeued(key, requeued);
        return;
      }
    } else {
      c.queued_at = now;
      request.pending.push_front(*i);
      ++requeued;
    }
  }
  if (options_.metrics && requeued > 0) options_.metrics->requeued(key, requeued);
  spdlog::warn("requeued {} candidates of request {}: {}", open.size(), request.id, reason);
  enqueue_locked(request, true);
}

void Broker::end_lease_locked(const std::string& lease_id) { leases_.erase(lease_id); }

void Broker::tick() {
  std::lock_guard<std::mutex> lock(mu_);
  auto now = options_.clock();
  std::vector<std::string> expired;
  for (auto& [id, lease] : leases_)
    if (lease.deadline <= now) expired.push_back(id);
  for (const auto& id : expired) {
    Lease& lease = leases_[id];
    Agent& agent = agents_[lease.agent];
    agent.last_error = fmt::format("lease {} expired before every candidate was answered", id);
    agent.stale_lease = id;
    agent.lease_id.clear();
    std::string key = agent.hello.device_key();
    if (options_.metrics) options_.metrics->lease_expired(key);
    requeue_locked(lease, fmt::format("the lease on agent '{}' expired", agent.hello.agent_id()));
    end_lease_locked(id);
    dispatch_locked(key);
  }
  std::vector<SessionId> silent;
  for (auto& [id, agent] : agents_)
    if (now - agent.last_seen > options_.heartbeat_timeout) silent.push_back(id);
  for (SessionId id : silent) {
    std::string why = fmt::format("no message for {} ms", options_.heartbeat_timeout.count());
    agents_[id].channel->close(deadline_exceeded(why));
    close_session_locked(id, why);
  }
  for (auto& [name, key] : keys_) {
    if (key.agents > 0 || now - key.empty_since < options_.no_agent_timeout) continue;
    std::vector<RequestId> stranded;
    for (auto& [id, request] : requests_)
      if (request.proto.device_key() == name) stranded.push_back(id);
    for (RequestId id : stranded) {
      auto it = requests_.find(id);
      if (it == requests_.end()) continue;
      Request& request = it->second;
      std::vector<int> pending(request.pending.begin(), request.pending.end());
      request.pending.clear();
      std::string why = fmt::format("no agent of key '{}' for {} s", name,
                                    std::chrono::duration_cast<std::chrono::seconds>(options_.no_agent_timeout).count());
      for (int i : pending) {
        deliver_locked(request, i, lost(why, request.candidates[i].attempts));
        if (requests_.find(id) == requests_.end()) break;
      }
    }
  }
}

void Broker::begin_drain() {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
}

bool Broker::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.empty();
}

void Broker::fail_all(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RequestId> ids;
  for (auto& [id, request] : requests_) ids.push_back(id);
  for (RequestId id : ids) {
    for (size_t i = 0;; ++i) {
      auto it = requests_.find(id);
      if (it == requests_.end() || i >= it->second.candidates.size()) break;
      if (!it->second.candidates[i].answered)
        deliver_locked(it->second, static_cast<int>(i), lost(reason, it->second.candidates[i].attempts));
    }
  }
}

void Broker::close_all_sessions(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SessionId> ids;
  for (auto& [id, agent] : agents_) ids.push_back(id);
  for (SessionId id : ids) {
    agents_[id].channel->close(why);
    close_session_locked(id, why.message());
  }
}

v1::AgentInfo Broker::agent_info_locked(const Agent& agent) const {
  v1::AgentInfo info;
  info.set_agent_id(agent.hello.agent_id());
  info.set_address(agent.peer);
  info.set_device_key(agent.hello.device_key());
  *info.mutable_capabilities() = agent.hello.capabilities();
  info.set_uptime_s(std::chrono::duration<double>(options_.clock() - agent.connected).count());
  info.set_batches_done(agent.batches_done);
  info.set_last_error(agent.last_error);
  info.set_busy(!agent.lease_id.empty() || !agent.stale_lease.empty());
  info.set_lease_id(agent.lease_id);
  return info;
}

int64_t Broker::pending_candidates_locked(const Key& key, int* batches) const {
  int64_t candidates = 0;
  *batches = 0;
  for (const auto& [priority, level] : key.queue)
    for (const auto& [job, fifo] : level.jobs)
      for (RequestId id : fifo) {
        auto it = requests_.find(id);
        if (it == requests_.end() || it->second.pending.empty()) continue;
        ++*batches;
        candidates += static_cast<int64_t>(it->second.pending.size());
      }
  return candidates;
}

v1::QueueStatusResponse Broker::queue_status(const std::string& device_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  v1::QueueStatusResponse response;
  for (const auto& [name, key] : keys_) {
    if (!device_key.empty() && name != device_key) continue;
    v1::DeviceKeyStatus* status = response.add_keys();
    status->set_device_key(name);
    status->set_agents_total(key.agents);
    status->set_agents_free(static_cast<int32_t>(key.free_agents.size()));
    status->set_agents_busy(key.agents - static_cast<int32_t>(key.free_agents.size()));
    int batches = 0;
    status->set_pending_candidates(pending_candidates_locked(key, &batches));
    status->set_pending_batches(batches);
    std::vector<const Agent*> members;
    for (const auto& [id, agent] : agents_)
      if (agent.hello.device_key() == name) members.push_back(&agent);
    std::sort(members.begin(), members.end(),
              [](const Agent* a, const Agent* b) { return a->hello.agent_id() < b->hello.agent_id(); });
    std::vector<AgentPlatform> platforms;
    for (const Agent* agent : members) {
      *status->add_agents() = agent_info_locked(*agent);
      platforms.push_back(agent_platform(status->agents(status->agents_size() - 1)));
    }
    if (Status agree = check_agents_agree_on_cpu(name, platforms); !agree.ok())
      status->set_cpu_disagreement(agree.message());
  }
  return response;
}

v1::ListDevicesResponse Broker::list_devices(const std::string& device_key) const {
  v1::ListDevicesResponse response;
  v1::QueueStatusResponse status = queue_status(device_key);
  for (auto& key : *status.mutable_keys())
    for (auto& agent : *key.mutable_agents()) *response.add_agents() = std::move(agent);
  return response;
}

}  // namespace tunefarm
