// The agent's session logic against a scripted tracker in this process: what the hello carries, one
// result per candidate and the batch handed back, redialling after a broken stream, a refusal
// ending run() with the tracker's reason, a batch past its deadline handed back unmeasured, and
// stop() ending an open session. The measurement itself is a stand-in (measure/ has its own tests).
#include "device_agent/agent.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "tunefarm/v1/tracker.grpc.pb.h"
#include "tunefarm/v1/tuner.grpc.pb.h"

namespace tunefarm {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

using AgentStream = grpc::ServerReaderWriter<v1::TrackerMessage, v1::AgentMessage>;

// What the tracker does with one session, in the order sessions arrive; sessions beyond the script
// are acknowledged and held open until the agent ends them.
using SessionScript = std::function<grpc::Status(AgentStream& stream)>;

class ScriptedTracker final : public v1::Tracker::Service {
 public:
  explicit ScriptedTracker(std::deque<SessionScript> script) : script_(std::move(script)) {}

  grpc::Status AgentSession(grpc::ServerContext* context, AgentStream* stream) override {
    v1::AgentMessage hello;
    if (!stream->Read(&hello) || !hello.has_hello()) return {grpc::StatusCode::INVALID_ARGUMENT, "no hello"};
    SessionScript script;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hellos_.push_back(hello.hello());
      if (!script_.empty()) {
        script = std::move(script_.front());
        script_.pop_front();
      }
    }
    changed_.notify_all();
    if (script) return script(*stream);
    ack(*stream);
    v1::AgentMessage ignored;
    while (!context->IsCancelled() && stream->Read(&ignored)) {
    }
    return grpc::Status::OK;
  }

  static void ack(AgentStream& stream) {
    v1::TrackerMessage ack;
    ack.mutable_hello_ack()->set_session_id("s");
    ack.mutable_hello_ack()->set_heartbeat_interval_ms(50);
    stream.Write(ack);
  }

  // Waits until `n` hellos have arrived; false after 10 s.
  bool wait_for_hellos(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, 10s, [&] { return hellos_.size() >= n; });
  }

  std::vector<v1::AgentHello> hellos() {
    std::lock_guard<std::mutex> lock(mu_);
    return hellos_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<SessionScript> script_;
  std::vector<v1::AgentHello> hellos_;
};

v1::LeasedBatch batch_of(const std::string& lease, int candidates, int64_t deadline_us = 0) {
  v1::LeasedBatch batch;
  batch.set_lease_id(lease);
  batch.mutable_workload()->set_op("matmul");
  batch.set_deadline_us(deadline_us);
  for (int i = 0; i < candidates; ++i) batch.add_candidates()->set_id(100 + i);
  return batch;
}

// Sends `batch` and collects what comes back until the agent says it is done with it.
struct Returned {
  std::vector<v1::CandidateResult> results;
  bool done = false;
  int heartbeats = 0;
};
Returned lease(AgentStream& stream, const v1::LeasedBatch& batch) {
  v1::TrackerMessage message;
  *message.mutable_batch() = batch;
  stream.Write(message);
  Returned returned;
  v1::AgentMessage reply;
  while (!returned.done && stream.Read(&reply)) {
    if (reply.has_result()) returned.results.push_back(reply.result());
    if (reply.has_heartbeat()) ++returned.heartbeats;
    if (reply.has_batch_done()) returned.done = reply.batch_done().lease_id() == batch.lease_id();
  }
  return returned;
}

class AgentSessionTest : public ::testing::Test {
 protected:
  void start(std::deque<SessionScript> script) {
    tracker_ = std::make_unique<ScriptedTracker>(std::move(script));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(tracker_.get());
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_);
    ASSERT_GT(port, 0);
    address_ = "127.0.0.1:" + std::to_string(port);
  }

  AgentOptions options() const {
    AgentOptions o;
    o.tracker = address_;
    o.device_key = "test-key";
    o.agent_id = "agent-under-test";
    o.token = "agent-secret";
    o.min_backoff = 20ms;
    o.max_backoff = 200ms;
    return o;
  }

  // Runs the agent on a thread of its own; the future holds what run() returned.
  std::future<Status> run(DeviceAgent& agent) {
    return std::async(std::launch::async, [&agent] { return agent.run(); });
  }

  // Runs `agent` until the tracker's script has handed back what it served, then stops it: what
  // was served (nothing if it never came) and what run() returned (an error if it never ended).
  std::pair<std::optional<Returned>, Status> serve(DeviceAgent& agent, std::promise<Returned>& served) {
    auto outcome = run(agent);
    auto future = served.get_future();
    std::optional<Returned> got;
    if (future.wait_for(10s) == std::future_status::ready) got = future.get();
    agent.stop();
    if (outcome.wait_for(10s) != std::future_status::ready) return {got, unavailable("run() did not end after stop()")};
    return {got, outcome.get()};
  }

  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 2s);
  }

  std::unique_ptr<ScriptedTracker> tracker_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

v1::MeasureResult ok_result(double seconds) {
  v1::MeasureResult r;
  r.set_error(v1::OK);
  r.add_costs(seconds);
  return r;
}

TEST_F(AgentSessionTest, AHelloCarriesItsKeyTokenAndCapabilitiesAndEveryCandidateGetsOneResult) {
  std::promise<Returned> returned;
  start({[&](AgentStream& stream) {
    ScriptedTracker::ack(stream);
    returned.set_value(lease(stream, batch_of("lease-1", 3)));
    return grpc::Status::OK;
  }});
  v1::Capabilities caps;
  caps.set_arch("x86_64");
  caps.add_targets("llvm");
  caps.set_cpu_name("testcpu");
  std::vector<uint64_t> measured;
  DeviceAgent agent(options(), caps, [&](const v1::LeasedBatch& batch, const v1::Candidate& c) {
    EXPECT_EQ(batch.lease_id(), "lease-1");
    measured.push_back(c.id());
    return ok_result(1e-3 * static_cast<double>(c.id()));
  });
  auto [served, outcome] = serve(agent, returned);
  ASSERT_TRUE(served.has_value()) << "the tracker's script never finished its lease";
  ASSERT_NE(outcome.code(), StatusCode::kUnavailable) << outcome.to_string();
  const Returned& got = *served;
  EXPECT_TRUE(outcome.ok());

  auto hellos = tracker_->hellos();
  ASSERT_GE(hellos.size(), 1u);
  EXPECT_EQ(hellos[0].agent_id(), "agent-under-test");
  EXPECT_EQ(hellos[0].device_key(), "test-key");
  EXPECT_EQ(hellos[0].token(), "agent-secret");
  EXPECT_EQ(hellos[0].capabilities().cpu_name(), "testcpu");
  EXPECT_EQ(hellos[0].capabilities().arch(), "x86_64");

  EXPECT_TRUE(got.done);
  EXPECT_EQ(measured, (std::vector<uint64_t>{100, 101, 102}));
  ASSERT_EQ(got.results.size(), 3u);
  for (size_t i = 0; i < got.results.size(); ++i) {
    EXPECT_EQ(got.results[i].lease_id(), "lease-1");
    EXPECT_EQ(got.results[i].candidate_id(), 100 + i);
    EXPECT_EQ(got.results[i].result().error(), v1::OK);
    // The agent stamps its id on every result, whatever the measurer said.
    EXPECT_EQ(got.results[i].result().agent_id(), "agent-under-test");
  }
}

TEST_F(AgentSessionTest, ABrokenSessionIsDialledAgainAndTheNextBatchIsServed) {
  std::promise<Returned> second;
  start({[](AgentStream& stream) {
          ScriptedTracker::ack(stream);
          // The tracker goes away mid-session, as a restarted one does.
          return grpc::Status(grpc::StatusCode::UNAVAILABLE, "tracker restarting");
        },
         [&](AgentStream& stream) {
           ScriptedTracker::ack(stream);
           second.set_value(lease(stream, batch_of("lease-2", 2)));
           return grpc::Status::OK;
         }});
  DeviceAgent agent(options(), v1::Capabilities(), [](const v1::LeasedBatch&, const v1::Candidate&) {
    return ok_result(1e-3);
  });
  auto [served, outcome] = serve(agent, second);
  ASSERT_TRUE(served.has_value()) << "the tracker's script never finished its lease";
  ASSERT_NE(outcome.code(), StatusCode::kUnavailable) << outcome.to_string();
  const Returned& got = *served;
  EXPECT_TRUE(outcome.ok());
  EXPECT_GE(agent.sessions(), 2);
  EXPECT_TRUE(got.done);
  EXPECT_EQ(got.results.size(), 2u);
}

TEST_F(AgentSessionTest, ARefusalEndsRunWithTheTrackersReasonInsteadOfDiallingForever) {
  start({[](AgentStream& stream) {
    v1::TrackerMessage bye;
    bye.mutable_goodbye()->set_reason("wrong agent token");
    stream.Write(bye);
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong agent token");
  }});
  DeviceAgent agent(options(), v1::Capabilities(), [](const v1::LeasedBatch&, const v1::Candidate&) {
    ADD_FAILURE() << "a refused agent measured something";
    return ok_result(1e-3);
  });
  auto outcome = run(agent);
  ASSERT_EQ(outcome.wait_for(10s), std::future_status::ready);
  Status s = outcome.get();
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(s.message(), HasSubstr("wrong agent token"));
  EXPECT_EQ(agent.sessions(), 0);
  EXPECT_EQ(tracker_->hellos().size(), 1u);
}

TEST_F(AgentSessionTest, ABatchPastItsDeadlineIsHandedBackUnmeasured) {
  std::promise<Returned> returned;
  start({[&](AgentStream& stream) {
    ScriptedTracker::ack(stream);
    int64_t an_hour_ago = std::chrono::duration_cast<std::chrono::microseconds>(
                              (std::chrono::system_clock::now() - 1h).time_since_epoch())
                              .count();
    returned.set_value(lease(stream, batch_of("late", 4, an_hour_ago)));
    return grpc::Status::OK;
  }});
  int measured = 0;
  DeviceAgent agent(options(), v1::Capabilities(), [&](const v1::LeasedBatch&, const v1::Candidate&) {
    ++measured;
    return ok_result(1e-3);
  });
  auto [served, outcome] = serve(agent, returned);
  ASSERT_TRUE(served.has_value()) << "the tracker's script never finished its lease";
  ASSERT_NE(outcome.code(), StatusCode::kUnavailable) << outcome.to_string();
  const Returned& got = *served;
  EXPECT_TRUE(got.done);
  EXPECT_TRUE(got.results.empty());
  EXPECT_EQ(measured, 0);
}

TEST_F(AgentSessionTest, AnAgentThatCannotMeasureLeavesWithoutReportingAndRejoinsWhenItCan) {
  std::atomic<bool> broken{true};
  std::promise<Returned> first, second;
  start({[&](AgentStream& stream) {
           ScriptedTracker::ack(stream);
           // The agent ends the session instead of finishing the lease: lease() returns when it does.
           first.set_value(lease(stream, batch_of("lease-1", 3)));
           return grpc::Status::OK;
         },
         [&](AgentStream& stream) {
           ScriptedTracker::ack(stream);
           second.set_value(lease(stream, batch_of("lease-2", 2)));
           return grpc::Status::OK;
         }});
  AgentOptions o = options();
  std::atomic<int> checks{0};
  o.can_measure = [&] {
    ++checks;
    return broken ? unavailable("cannot start the measurement worker: No such file or directory") : Status();
  };
  o.recheck = 50ms;
  int measured = 0;
  DeviceAgent agent(o, v1::Capabilities(), [&](const v1::LeasedBatch&, const v1::Candidate&) {
    ++measured;
    if (broken) {
      v1::MeasureResult failed;
      failed.set_error(v1::UNKNOWN);
      failed.set_error_msg("cannot start the measurement worker");
      return failed;
    }
    return ok_result(1e-3);
  });
  auto outcome = run(agent);
  auto left = first.get_future();
  ASSERT_EQ(left.wait_for(10s), std::future_status::ready);
  Returned got = left.get();
  EXPECT_FALSE(got.done);
  EXPECT_TRUE(got.results.empty()) << "a failure of the agent's own was reported as the candidate's";
  EXPECT_EQ(measured, 1);
  // It stays away while it cannot measure, checking again meanwhile.
  std::this_thread::sleep_for(400ms);
  EXPECT_TRUE(agent.unfit());
  EXPECT_EQ(tracker_->hellos().size(), 1u);
  EXPECT_GE(checks.load(), 3);
  broken = false;
  auto rejoined = second.get_future();
  ASSERT_EQ(rejoined.wait_for(10s), std::future_status::ready);
  Returned again = rejoined.get();
  EXPECT_TRUE(again.done);
  EXPECT_EQ(again.results.size(), 2u);
  EXPECT_FALSE(agent.unfit());
  EXPECT_EQ(tracker_->hellos().size(), 2u);
  agent.stop();
  ASSERT_EQ(outcome.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(outcome.get().ok());
}

TEST_F(AgentSessionTest, StopEndsAnOpenSessionAndRunReturnsOk) {
  start({});
  DeviceAgent agent(options(), v1::Capabilities(), [](const v1::LeasedBatch&, const v1::Candidate&) {
    return ok_result(1e-3);
  });
  auto outcome = run(agent);
  ASSERT_TRUE(tracker_->wait_for_hellos(1));
  agent.stop();
  ASSERT_EQ(outcome.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(outcome.get().ok());
}

TEST_F(AgentSessionTest, AnAddressThatIsNoTrackerIsNamedAsSuch) {
  // A gRPC server with another service than the tracker's: tunerd's port, say.
  v1::Tuner::Service tuner;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&tuner);
  auto other = builder.BuildAndStart();
  ASSERT_TRUE(other);
  AgentOptions o;
  o.tracker = "127.0.0.1:" + std::to_string(port);
  o.min_backoff = 20ms;
  o.max_backoff = 200ms;
  DeviceAgent agent(o, v1::Capabilities(), [](const v1::LeasedBatch&, const v1::Candidate&) {
    return ok_result(1e-3);
  });
  auto outcome = run(agent);
  ASSERT_EQ(outcome.wait_for(10s), std::future_status::ready);
  Status s = outcome.get();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("is not a tracker"));
  other->Shutdown(std::chrono::system_clock::now() + 1s);
}

}  // namespace
}  // namespace tunefarm
