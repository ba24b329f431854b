#include "tracker/broker.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/tracker/fake_channels.h"

namespace tunefarm {
namespace {

using namespace tunefarm::testing;

class BrokerTest : public ::testing::Test {
 protected:
  BrokerOptions options() {
    BrokerOptions o;
    o.clock = [this] { return clock_.now; };
    return o;
  }
  std::shared_ptr<FakeAgent> connect(Broker& broker, const std::string& id, const std::string& key = "cpu",
                                     SessionId* out = nullptr) {
    auto agent = std::make_shared<FakeAgent>();
    SessionId session = 0;
    auto ack = broker.open_session(hello(id, key), "ipv4:127.0.0.1:1", agent, session);
    EXPECT_TRUE(ack.ok()) << ack.status().to_string();
    sessions_[agent.get()] = session;
    if (out) *out = session;
    return agent;
  }
  // The agent answers every candidate of its latest batch, then says it is done.
  void answer_all(Broker& broker, FakeAgent& agent) {
    const v1::LeasedBatch batch = agent.batches.back();
    for (int i = 0; i < batch.candidates_size(); ++i)
      ASSERT_TRUE(broker.on_agent_message(sessions_[&agent], result_for(batch, i)).ok());
    ASSERT_TRUE(broker.on_agent_message(sessions_[&agent], done(batch)).ok());
  }
  FakeClock clock_;
  std::map<FakeAgent*, SessionId> sessions_;
};

TEST_F(BrokerTest, LeasesToAFreeAgentAndDeliversEveryResultOnce) {
  Broker broker(options());
  auto agent = connect(broker, "a1");
  auto tuner = std::make_shared<FakeTuner>();
  ASSERT_TRUE(broker.submit(request(3), tuner).ok());
  ASSERT_EQ(agent->batches.size(), 1u);
  EXPECT_EQ(agent->batches[0].candidates_size(), 3);
  EXPECT_GT(agent->batches[0].deadline_us(), 0);
  answer_all(broker, *agent);
  ASSERT_EQ(tuner->results.size(), 3u);
  EXPECT_EQ(tuner->finished, 1);
  for (const auto& r : tuner->results) {
    EXPECT_EQ(r.result().agent_id(), "a1");
    EXPECT_EQ(r.result().attempts(), 1);
  }
  auto status = broker.queue_status("");
  ASSERT_EQ(status.keys_size(), 1);
  EXPECT_EQ(status.keys(0).agents_free(), 1);
  EXPECT_EQ(status.keys(0).agents(0).batches_done(), 1);
  EXPECT_TRUE(broker.idle());
}

TEST_F(BrokerTest, SplitsARequestOverFreeAgentsInBoundedChunks) {
  Broker broker(options());
  auto a = connect(broker, "a");
  auto b = connect(broker, "b");
  auto tuner = std::make_shared<FakeTuner>();
  ASSERT_TRUE(broker.submit(request(32), tuner).ok());
  ASSERT_EQ(a->batches.size(), 1u);
  ASSERT_EQ(b->batches.size(), 1u);
  EXPECT_EQ(a->batches[0].candidates_size(), 8);
  EXPECT_EQ(b->batches[0].candidates_size(), 8);
  auto status = broker.queue_status("cpu");
  EXPECT_EQ(status.keys(0).pending_candidates(), 16);
  EXPECT_EQ(status.keys(0).pending_batches(), 1);
  EXPECT_EQ(status.keys(0).agents_busy(), 2);
  while (tuner->finished == 0) {
    answer_all(broker, *a);
    if (tuner->finished == 0) answer_all(broker, *b);
  }
  auto counts = tuner->count_by_candidate();
  EXPECT_EQ(counts.size(), 32u);
  for (auto [id, n] : counts) EXPECT_EQ(n, 1) << id;
}

TEST_F(BrokerTest, ManyFreeAgentsGetChunksOfAtLeastTheMinimum) {
  Broker broker(options());
  std::vector<std::shared_ptr<FakeAgent>> agents;
  for (char id = 'a'; id < 'g'; ++id) agents.push_back(connect(broker, std::string(1, id)));
  auto tuner = std::make_shared<FakeTuner>();
  ASSERT_TRUE(broker.submit(request(10), tuner).ok());
  std::vector<int> sizes;
  for (auto& a : agents)
    if (!a->batches.empty()) sizes.push_back(a->batches[0].candidates_size());
  EXPECT_EQ(sizes, std::vector<int>({4, 4, 2}));
}

TEST_F(BrokerTest, UnansweredCandidatesOfALostAgentGoToAnother) {
  Broker broker(options());
  SessionId a_session = 0;
  auto a = connect(broker, "a", "cpu", &a_session);
  auto tuner = std::make_shared<FakeTuner>();
  ASSERT_TRUE(broker.submit(request(8), tuner).ok());
  const v1::LeasedBatch lease = a->batches[0];
  ASSERT_TRUE(broker.on_agent_message(a_session, result_for(lease, 0)).ok());
  ASSERT_TRUE(broker.on_agent_message(a_session, result_for(lease, 1)).ok());
  broker.close_session(a_session, "stream broken");
  EXPECT_EQ(broker.queue_status("cpu").keys(0).pending_candidates(), 6);
  auto b = connect(broker, "b");
  ASSERT_EQ(b->batches.size(), 1u);
  EXPECT_EQ(b->batches[0].candidates_size(), 6);
  EXPECT_EQ(b->batches[0].candidates(0).id(), 2u);
  answer_all(broker, *b);
  ASSERT_EQ(tuner->finished, 1);
  auto counts = tuner->count_by_candidate();
  ASSERT_EQ(counts.size(), 8u);
  for (const auto& r : tuner->results)
    EXPECT_EQ(r.result().attempts(), r.candidate_id() < 2 ? 1 : 2) << r.candidate_id();
}

TEST_F(BrokerTest, RetriesAreBoundedThenDeviceLost) {
  BrokerOptions o = options();
  o.max_attempts = 2;
  Broker broker(o);
  auto tuner = std::make_shared<FakeTuner>();
  SessionId s1 = 0, s2 = 0;
  connect(broker, "a", "cpu", &s1);
  ASSERT_TRUE(broker.submit(request(2), tuner).ok());
  broker.close_session(s1, "crashed");
  connect(broker, "b", "cpu", &s2);
  broker.close_session(s2, "crashed again");
  ASSERT_EQ(tuner->finished, 1);
  ASSERT_EQ(tuner->results.size(), 2u);
  for (const auto& r : tuner->results) {
    EXPECT_EQ(r.result().error(), v1::DEVICE_LOST);
    EXPECT_EQ(r.result().attempts(), 2);
    EXPECT_NE(r.result().error_msg().find("crashed again"), std::string::npos) << r.result().error_msg();
  }
}

TEST_F(BrokerTest, ExpiredLeaseIsRequeuedAndTheLateAnswerDropped) {
  Broker broker(options());
  SessionId a_session = 0, b_session = 0;
  auto a = connect(broker, "a", "cpu", &a_session);
  auto tuner = std::make_shared<FakeTuner>();
  ASSERT_TRUE(broker.submit(request(2), tuner).ok());
  const v1::LeasedBatch first = a->batches[0];
  auto b = connect(broker, "b", "cpu", &b_session);
  EXPECT_TRUE(b->batches.empty());
  // Timeouts of 1 s for 2 candidates plus the reference, plus 5 s grace: 8 s.
  clock_.advance(std::chrono::milliseconds(4000));
  ASSERT_TRUE(broker.on_agent_message(b_session, v1::AgentMessage()).code() == StatusCode::kInvalidArgument);
  v1::AgentMessage beat;
  beat.mutable_heartbeat();
  ASSERT_TRUE(broker.on_agent_message(a_session, beat).ok());
  clock_.advance(std::chrono::milliseconds(4100));
  broker.tick();
  ASSERT_EQ(b->batches.size(), 1u);
  EXPECT_NE(broker.queue_status("cpu").keys(0).agents(0).last_error().find("expired"), std::string::npos);
  // Agent a finally answers: too late, the candidates are b's now.
  ASSERT_TRUE(broker.on_agent_message(a_session, result_for(first, 0)).ok());
  EXPECT_TRUE(tuner->results.empty());
  answer_all(broker, *b);
  EXPECT_EQ(tuner->results.size(), 2u);
  for (const auto& r : tuner->results) EXPECT_EQ(r.result().agent_id(), "b");
  // Agent a stays busy until it ends the stale lease, then takes work again.
  EXPECT_EQ(broker.queue_status("cpu").keys(0).agents_free(), 1);
  ASSERT_TRUE(broker.on_agent_message(a_session, done(first)).ok());
  EXPECT_EQ(broker.queue_status("cpu").keys(0).agents_free(), 2);
}

TEST_F(BrokerTest, SilentAgentIsDroppedAndItsWorkRequeued) {
  Broker broker(options());
  auto a = connect(broker, "a");
  auto tuner = std::make_shared<FakeTuner>();
  ASSERT_TRUE(broker.submit(request(1), tuner).ok());
  clock_.advance(std::chrono::milliseconds(5001));
  broker.tick();
  EXPECT_TRUE(a->was_closed);
  EXPECT_EQ(a->closed.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(broker.queue_status("cpu").keys(0).agents_total(), 0);
  auto b = connect(broker, "b");
  ASSERT_EQ(b->batches.size(), 1u);
}

TEST_F(BrokerTest, HigherPriorityFirstThenJobsTakeTurnsThenArrival) {
  BrokerOptions o = options();
  o.max_lease_candidates = 1;
  o.min_lease_candidates = 1;
  Broker broker(o);
  SessionId session = 0;
  auto agent = connect(broker, "a", "cpu", &session);
  auto blocker = std::make_shared<FakeTuner>();
  ASSERT_TRUE(broker.submit(request(1, "blocker", 0, "cpu", 900), blocker).ok());
  auto t = std::make_shared<FakeTuner>();
  ASSERT_TRUE(broker.submit(request(2, "x", 0, "cpu", 100), t).ok());
  ASSERT_TRUE(broker.submit(request(2, "x", 0, "cpu", 200), t).ok());
  ASSERT_TRUE(broker.submit(request(2, "y", 0, "cpu", 300), t).ok());
  ASSERT_TRUE(broker.submit(request(1, "urgent", 5, "cpu", 400), t).ok());
  std::vector<uint64_t> order;
  for (int i = 0; i < 8; ++i) {
    answer_all(broker, *agent);
    order.push_back(agent->batches.back().candidates(0).id());
  }
  // urgent first; then x and y alternate; within x, its first request before its second.
  EXPECT_EQ(order, std::vector<uint64_t>({400, 100, 300, 101, 301, 200, 201, 201}));
}

TEST_F(BrokerTest, CancelledRequestIsDroppedAndLateResultsIgnored) {
  Broker broker(options());
  SessionId session = 0;
  auto agent = connect(broker, "a", "cpu", &session);
  auto tuner = std::make_shared<FakeTuner>();
  auto id = broker.submit(request(20), tuner);
  ASSERT_TRUE(id.ok());
  broker.cancel(*id);
  EXPECT_EQ(broker.queue_status("cpu").keys(0).pending_candidates(), 0);
  answer_all(broker, *agent);
  EXPECT_TRUE(tuner->results.empty());
  EXPECT_EQ(broker.queue_status("cpu").keys(0).agents_free(), 1);
  EXPECT_TRUE(broker.idle());
}

TEST_F(BrokerTest, RequestsForAKeyWithoutAgentsFailAfterTheWait) {
  Broker broker(options());
  SessionId session = 0;
  connect(broker, "a", "cpu", &session);
  broker.close_session(session, "gone");
  auto tuner = std::make_shared<FakeTuner>();
  ASSERT_TRUE(broker.submit(request(3), tuner).ok());
  clock_.advance(std::chrono::seconds(29));
  broker.tick();
  EXPECT_TRUE(tuner->results.empty());
  clock_.advance(std::chrono::seconds(2));
  broker.tick();
  ASSERT_EQ(tuner->results.size(), 3u);
  EXPECT_EQ(tuner->results[0].result().error(), v1::DEVICE_LOST);
  EXPECT_EQ(tuner->finished, 1);
}

TEST_F(BrokerTest, DrainRefusesNewWorkAndFailAllAnswersTheRest) {
  Broker broker(options());
  connect(broker, "a");
  auto tuner = std::make_shared<FakeTuner>();
  ASSERT_TRUE(broker.submit(request(10), tuner).ok());
  broker.begin_drain();
  auto refused = broker.submit(request(1), std::make_shared<FakeTuner>());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(broker.idle());
  broker.fail_all("shut down");
  EXPECT_EQ(tuner->results.size(), 10u);
  EXPECT_EQ(tuner->finished, 1);
  EXPECT_TRUE(broker.idle());
}

TEST_F(BrokerTest, ListDevicesShowsEveryAgent) {
  Broker broker(options());
  connect(broker, "a", "cpu");
  connect(broker, "g", "gpu");
  auto all = broker.list_devices("");
  ASSERT_EQ(all.agents_size(), 2);
  auto gpu = broker.list_devices("gpu");
  ASSERT_EQ(gpu.agents_size(), 1);
  EXPECT_EQ(gpu.agents(0).agent_id(), "g");
  EXPECT_EQ(gpu.agents(0).capabilities().num_cores(), 2);
}

// tunerd decides at submit whether a key's agents can run a job's target from what their hellos said,
// so the tracker lists each agent's architecture and targets as it sent them; an agent too old to
// name its architecture is listed without one.
TEST_F(BrokerTest, ListingsCarryEachAgentsArchitectureAndTargets) {
  Broker broker(options());
  auto say = [&](const std::string& id, const std::string& arch, std::vector<std::string> targets) {
    v1::AgentHello h = hello(id, "lab");
    h.mutable_capabilities()->set_arch(arch);
    for (const auto& t : targets) h.mutable_capabilities()->add_targets(t);
    SessionId session = 0;
    ASSERT_TRUE(broker.open_session(h, "ipv4:127.0.0.1:1", std::make_shared<FakeAgent>(), session).ok());
  };
  say("arm", "aarch64", {"llvm"});
  say("gpu", "x86_64", {"llvm", "cuda"});
  say("old", "", {"llvm"});

  auto listed = broker.list_devices("lab");
  ASSERT_EQ(listed.agents_size(), 3);
  std::map<std::string, v1::Capabilities> caps;
  for (const auto& a : listed.agents()) caps[a.agent_id()] = a.capabilities();
  EXPECT_EQ(caps["arm"].arch(), "aarch64");
  EXPECT_EQ(std::vector<std::string>(caps["arm"].targets().begin(), caps["arm"].targets().end()),
            std::vector<std::string>{"llvm"});
  EXPECT_EQ(caps["gpu"].arch(), "x86_64");
  EXPECT_EQ(std::vector<std::string>(caps["gpu"].targets().begin(), caps["gpu"].targets().end()),
            (std::vector<std::string>{"llvm", "cuda"}));
  EXPECT_EQ(caps["old"].arch(), "");

  auto status = broker.queue_status("lab");
  ASSERT_EQ(status.keys_size(), 1);
  ASSERT_EQ(status.keys(0).agents_size(), 3);
  EXPECT_EQ(status.keys(0).agents(0).agent_id(), "arm");
  EXPECT_EQ(status.keys(0).agents(0).capabilities().arch(), "aarch64");
  EXPECT_EQ(status.keys(0).agents(1).capabilities().targets_size(), 2);
}

// Two agents started with one --id used to replace each other every few hundred milliseconds: a
// live session keeps its id and the second hello is refused, naming the id; once the first has
// gone silent past the heartbeat timeout, its id is free for the agent's new session.
TEST_F(BrokerTest, ASecondAgentWithALiveAgentsIdIsRefused) {
  Broker broker(options());
  auto first = connect(broker, "board-1");
  auto second = std::make_shared<FakeAgent>();
  SessionId session = 0;
  auto refused = broker.open_session(hello("board-1", "cpu"), "ipv4:127.0.0.1:2", second, session);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(refused.status().message().find("agent id 'board-1' is already connected"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(broker.list_devices("").agents_size(), 1);

  clock_.now += BrokerOptions{}.heartbeat_timeout + std::chrono::seconds(1);
  auto replaced = broker.open_session(hello("board-1", "cpu"), "ipv4:127.0.0.1:3", second, session);
  EXPECT_TRUE(replaced.ok()) << replaced.status().to_string();
}

}  // namespace
}  // namespace tunefarm
