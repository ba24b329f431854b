// Bad input reaches the broker as values with a clear status, and nothing else is disturbed.
#include <gtest/gtest.h>

#include "tests/tracker/fake_channels.h"
#include "tracker/broker.h"

namespace tunefarm {
namespace {

using namespace tunefarm::testing;

StatusOr<v1::HelloAck> open(Broker& broker, const v1::AgentHello& h, std::shared_ptr<FakeAgent> agent = nullptr,
                            SessionId* session = nullptr) {
  SessionId s = 0;
  auto ack = broker.open_session(h, "peer", agent ? agent : std::make_shared<FakeAgent>(), s);
  if (session) *session = s;
  return ack;
}

TEST(BrokerFault, MalformedHellosAreRefused) {
  Broker broker;
  EXPECT_EQ(open(broker, hello("", "cpu")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(open(broker, hello("a", "")).status().code(), StatusCode::kInvalidArgument);
  auto spaced = open(broker, hello("a", "bad key"));
  ASSERT_FALSE(spaced.ok());
  EXPECT_NE(spaced.status().message().find("device_key"), std::string::npos);
  EXPECT_FALSE(open(broker, hello(std::string(500, 'x'), "cpu")).ok());
  EXPECT_TRUE(broker.queue_status("").keys().empty());
}

TEST(BrokerFault, WrongTokensAreUnauthenticated) {
  BrokerOptions o;
  o.agent_token = "secret-a";
  o.tuner_token = "secret-t";
  Broker broker(o);
  EXPECT_EQ(open(broker, hello("a")).status().code(), StatusCode::kUnauthenticated);
  v1::AgentHello good = hello("a");
  good.set_token("secret-a");
  ASSERT_TRUE(open(broker, good).ok());
  // The token is not kept where ListDevices could show it.
  v1::MeasureRequest r = request(1);
  EXPECT_EQ(broker.submit(r, std::make_shared<FakeTuner>()).status().code(), StatusCode::kUnauthenticated);
  r.set_token("secret-t");
  EXPECT_TRUE(broker.submit(r, std::make_shared<FakeTuner>()).ok());
}

// The same agent reconnecting before its old stream was noticed as broken: once the old session
// has been silent past the heartbeat timeout, the new one takes its id and its lease is requeued.
TEST(BrokerFault, SameAgentIdReplacesASilentSessionAndRequeuesItsLease) {
  FakeClock clock;
  BrokerOptions options;
  options.clock = [&clock] { return clock.now; };
  Broker broker(options);
  auto first = std::make_shared<FakeAgent>();
  ASSERT_TRUE(open(broker, hello("a"), first).ok());
  auto tuner = std::make_shared<FakeTuner>();
  ASSERT_TRUE(broker.submit(request(2), tuner).ok());
  ASSERT_EQ(first->batches.size(), 1u);
  auto second = std::make_shared<FakeAgent>();
  clock.now += options.heartbeat_timeout + std::chrono::seconds(1);
  ASSERT_TRUE(open(broker, hello("a"), second).ok());
  EXPECT_TRUE(first->was_closed);
  ASSERT_EQ(second->batches.size(), 1u);
  EXPECT_EQ(second->batches[0].candidates_size(), 2);
  EXPECT_EQ(broker.queue_status("cpu").keys(0).agents_total(), 1);
}

TEST(BrokerFault, ProtocolViolationsAreErrorsAndOthersKeepWorking) {
  Broker broker;
  SessionId bad = 0, good = 0;
  auto bad_agent = std::make_shared<FakeAgent>();
  auto good_agent = std::make_shared<FakeAgent>();
  ASSERT_TRUE(open(broker, hello("bad"), bad_agent, &bad).ok());
  ASSERT_TRUE(open(broker, hello("good"), good_agent, &good).ok());
  v1::AgentMessage second_hello;
  *second_hello.mutable_hello() = hello("bad");
  EXPECT_EQ(broker.on_agent_message(bad, second_hello).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(broker.on_agent_message(bad, v1::AgentMessage()).code(), StatusCode::kInvalidArgument);
  v1::AgentMessage stray_done;
  stray_done.mutable_batch_done()->set_lease_id("L999");
  EXPECT_EQ(broker.on_agent_message(bad, stray_done).code(), StatusCode::kInvalidArgument);

  auto tuner = std::make_shared<FakeTuner>();
  ASSERT_TRUE(broker.submit(request(1), tuner).ok());
  const v1::LeasedBatch lease = bad_agent->batches.at(0);
  v1::AgentMessage foreign = result_for(lease, 0);
  foreign.mutable_result()->set_candidate_id(12345);
  Status s = broker.on_agent_message(bad, foreign);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("12345"), std::string::npos);
  // The service ends a violating session; its work moves to the good agent.
  broker.close_session(bad, s.message());
  ASSERT_EQ(good_agent->batches.size(), 1u);
  const v1::LeasedBatch moved = good_agent->batches[0];
  for (int i = 0; i < moved.candidates_size(); ++i) ASSERT_TRUE(broker.on_agent_message(good, result_for(moved, i)).ok());
  EXPECT_EQ(tuner->finished, 1);
  EXPECT_EQ(broker.on_agent_message(bad, stray_done).code(), StatusCode::kNotFound);
}

TEST(BrokerFault, InvalidRequestsAreRefusedWithTheReason) {
  BrokerOptions o;
  o.max_artifact_bytes = 1000;
  Broker broker(o);
  ASSERT_TRUE(open(broker, hello("a")).ok());
  auto expect_refused = [&](v1::MeasureRequest r, StatusCode code, const std::string& words) {
    auto got = broker.submit(std::move(r), std::make_shared<FakeTuner>());
    ASSERT_FALSE(got.ok()) << words;
    EXPECT_EQ(got.status().code(), code) << got.status().to_string();
    EXPECT_NE(got.status().message().find(words), std::string::npos) << got.status().to_string();
  };
  expect_refused(request(1, "j", 0, "nowhere"), StatusCode::kNotFound, "no agent serves device key 'nowhere'");
  expect_refused(request(0), StatusCode::kInvalidArgument, "no candidates");
  v1::MeasureRequest big = request(3);
  big.mutable_candidates(1)->mutable_artifact()->set_data(std::string(1001, 'x'));
  expect_refused(big, StatusCode::kInvalidArgument, "candidate 1 is 1001 bytes, over the tracker's limit of 1000");
  v1::MeasureRequest dup = request(2);
  dup.mutable_candidates(1)->set_id(0);
  expect_refused(dup, StatusCode::kInvalidArgument, "appears twice");
  v1::MeasureRequest no_ref = request(1);
  no_ref.mutable_options()->set_check_correctness(true);
  expect_refused(no_ref, StatusCode::kInvalidArgument, "no reference");
  v1::MeasureRequest bad_workload = request(1);
  bad_workload.mutable_workload()->set_op("frobnicate");
  expect_refused(bad_workload, StatusCode::kInvalidArgument, "workload");
  v1::MeasureRequest no_format = request(1);
  no_format.mutable_candidates(0)->mutable_artifact()->clear_format();
  expect_refused(no_format, StatusCode::kInvalidArgument, "format");
  v1::MeasureRequest negative = request(1);
  negative.mutable_options()->set_timeout_s(-1);
  expect_refused(negative, StatusCode::kInvalidArgument, "negative");
  EXPECT_TRUE(broker.idle());
  EXPECT_TRUE(broker.submit(request(1), std::make_shared<FakeTuner>()).ok());
}

}  // namespace
}  // namespace tunefarm
