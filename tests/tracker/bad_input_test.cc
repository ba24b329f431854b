// Table-driven bad input for the tracker's entry points, in-process: Measure requests
// (validate_measure_request, what the service runs first), agent hellos and agent messages after
// the hello. Each case names the status code and a piece of the message that points at the field;
// afterwards the broker still serves a good request end to end.
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "tests/tracker/fake_channels.h"
#include "tracker/broker.h"

namespace tunefarm {
namespace {

using namespace tunefarm::testing;

struct RequestCase {
  const char* name;
  std::function<void(v1::MeasureRequest&)> spoil;
  StatusCode code;
  const char* message;
};

const RequestCase kRequestCases[] = {
    {"wrong token", [](auto& r) { r.set_token("guess"); }, StatusCode::kUnauthenticated, "tuner token"},
    {"no token", [](auto& r) { r.clear_token(); }, StatusCode::kUnauthenticated, "tuner token"},
    {"empty key", [](auto& r) { r.set_device_key(""); }, StatusCode::kInvalidArgument, "device_key"},
    {"key with space", [](auto& r) { r.set_device_key("a b"); }, StatusCode::kInvalidArgument, "device_key"},
    {"key too long", [](auto& r) { r.set_device_key(std::string(129, 'k')); }, StatusCode::kInvalidArgument, "device_key"},
    {"key with slash", [](auto& r) { r.set_device_key("../etc"); }, StatusCode::kInvalidArgument, "device_key"},
    {"job id too long", [](auto& r) { r.set_job_id(std::string(129, 'j')); }, StatusCode::kInvalidArgument, "job_id"},
    {"no candidates", [](auto& r) { r.clear_candidates(); }, StatusCode::kInvalidArgument, "no candidates"},
    {"too many candidates", [](auto& r) { *r.mutable_candidates() = request(11).candidates(); },
     StatusCode::kInvalidArgument, "over the limit of 10"},
    {"duplicate candidate id", [](auto& r) { r.mutable_candidates(1)->set_id(0); }, StatusCode::kInvalidArgument,
     "appears twice"},
    {"unknown op", [](auto& r) { r.mutable_workload()->set_op("fft"); }, StatusCode::kInvalidArgument, "workload"},
    {"no op", [](auto& r) { r.mutable_workload()->clear_op(); }, StatusCode::kInvalidArgument, "workload"},
    {"missing parameter", [](auto& r) { r.mutable_workload()->mutable_params()->RemoveLast(); },
     StatusCode::kInvalidArgument, "K"},
    {"zero dimension", [](auto& r) { r.mutable_workload()->mutable_params(0)->set_value(0); },
     StatusCode::kInvalidArgument, "M"},
    {"negative dimension", [](auto& r) { r.mutable_workload()->mutable_params(1)->set_value(-5); },
     StatusCode::kInvalidArgument, "N"},
    {"huge dimension", [](auto& r) { r.mutable_workload()->mutable_params(2)->set_value(int64_t{1} << 40); },
     StatusCode::kInvalidArgument, "K"},
    {"unknown parameter",
     [](auto& r) {
       auto* p = r.mutable_workload()->add_params();
       p->set_name("Q");
       p->set_value(3);
     },
     StatusCode::kInvalidArgument, "Q"},
    {"negative number", [](auto& r) { r.mutable_options()->set_number(-1); }, StatusCode::kInvalidArgument,
     "negative"},
    {"negative repeat", [](auto& r) { r.mutable_options()->set_repeat(-1); }, StatusCode::kInvalidArgument,
     "negative"},
    {"negative timeout", [](auto& r) { r.mutable_options()->set_timeout_s(-1); }, StatusCode::kInvalidArgument,
     "negative"},
    {"timeout over an hour", [](auto& r) { r.mutable_options()->set_timeout_s(7200); },
     StatusCode::kInvalidArgument, "timeout_s"},
    {"negative rtol", [](auto& r) { r.mutable_options()->set_rtol(-0.1); }, StatusCode::kInvalidArgument, "negative"},
    {"check without reference", [](auto& r) { r.mutable_options()->set_check_correctness(true); },
     StatusCode::kInvalidArgument, "reference"},
    {"empty reference",
     [](auto& r) {
       r.mutable_options()->set_check_correctness(true);
       *r.mutable_reference() = r.candidates(0).artifact();
       r.mutable_reference()->clear_data();
     },
     StatusCode::kInvalidArgument, "reference artifact is empty"},
    {"artifact without format", [](auto& r) { r.mutable_candidates(0)->mutable_artifact()->clear_format(); },
     StatusCode::kInvalidArgument, "candidate 0 has no known format"},
    {"empty artifact", [](auto& r) { r.mutable_candidates(1)->mutable_artifact()->clear_data(); },
     StatusCode::kInvalidArgument, "candidate 1 is empty"},
    {"oversized artifact",
     [](auto& r) { r.mutable_candidates(0)->mutable_artifact()->set_data(std::string(4097, 'x')); },
     StatusCode::kInvalidArgument, "over the tracker's limit of 4096 bytes"},
    {"no entry symbol", [](auto& r) { r.mutable_candidates(0)->mutable_artifact()->clear_entry_symbol(); },
     StatusCode::kInvalidArgument, "entry symbol"},
    {"no tensor arguments", [](auto& r) { r.mutable_candidates(0)->mutable_artifact()->clear_args(); },
     StatusCode::kInvalidArgument, "tensor arguments"},
};

BrokerOptions strict_options() {
  BrokerOptions o;
  o.agent_token = "agent-secret";
  o.tuner_token = "tuner-secret";
  o.max_candidates = 10;
  o.max_artifact_bytes = 4096;
  return o;
}

v1::MeasureRequest good_request() {
  v1::MeasureRequest r = request(2);
  r.set_token("tuner-secret");
  return r;
}

TEST(TrackerBadInput, MeasureRequestsNameTheFieldAtFault) {
  BrokerOptions options = strict_options();
  ASSERT_TRUE(validate_measure_request(good_request(), options).ok());
  for (const RequestCase& c : kRequestCases) {
    v1::MeasureRequest r = good_request();
    c.spoil(r);
    Status s = validate_measure_request(r, options);
    EXPECT_EQ(s.code(), c.code) << c.name << ": " << s.to_string();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << c.name << ": " << s.message();
  }
}

struct HelloCase {
  const char* name;
  std::function<void(v1::AgentHello&)> spoil;
  StatusCode code;
  const char* message;
};

const HelloCase kHelloCases[] = {
    {"wrong token", [](auto& h) { h.set_token("guess"); }, StatusCode::kUnauthenticated, "agent token"},
    {"no token", [](auto& h) { h.clear_token(); }, StatusCode::kUnauthenticated, "agent token"},
    {"tuner token", [](auto& h) { h.set_token("tuner-secret"); }, StatusCode::kUnauthenticated, "agent token"},
    {"empty agent id", [](auto& h) { h.clear_agent_id(); }, StatusCode::kInvalidArgument, "agent_id"},
    {"agent id with newline", [](auto& h) { h.set_agent_id("a\nb"); }, StatusCode::kInvalidArgument, "agent_id"},
    {"agent id too long", [](auto& h) { h.set_agent_id(std::string(200, 'a')); }, StatusCode::kInvalidArgument,
     "agent_id"},
    {"empty device key", [](auto& h) { h.clear_device_key(); }, StatusCode::kInvalidArgument, "device_key"},
    {"device key with NUL", [](auto& h) { h.set_device_key(std::string("cp\0u", 4)); },
     StatusCode::kInvalidArgument, "device_key"},
    {"arch with a space", [](auto& h) { h.mutable_capabilities()->set_arch("x86 64"); }, StatusCode::kInvalidArgument,
     "capabilities.arch"},
    {"arch too long", [](auto& h) { h.mutable_capabilities()->set_arch(std::string(200, 'x')); },
     StatusCode::kInvalidArgument, "capabilities.arch"},
    {"cpu name with a quote", [](auto& h) { h.mutable_capabilities()->set_cpu_name("has'well"); },
     StatusCode::kInvalidArgument, "hello: capabilities: CPU name"},
    {"features without a cpu", [](auto& h) { h.mutable_capabilities()->set_cpu_features("+avx2"); },
     StatusCode::kInvalidArgument, "CPU name ''"},
    {"features not +/-", [](auto& h) {
       h.mutable_capabilities()->set_cpu_name("haswell");
       h.mutable_capabilities()->set_cpu_features("avx2");
     },
     StatusCode::kInvalidArgument, "CPU feature 'avx2'"},
    {"features too long", [](auto& h) {
       h.mutable_capabilities()->set_cpu_name("haswell");
       std::string many;
       for (int i = 0; i < 200; ++i) many += (i ? ",+f" : "+f") + std::to_string(i);
       h.mutable_capabilities()->set_cpu_features(many);
     },
     StatusCode::kInvalidArgument, "CPU features of"},
};

TEST(TrackerBadInput, HellosAreRefusedWithTheReason) {
  Broker broker(strict_options());
  for (const HelloCase& c : kHelloCases) {
    v1::AgentHello h = hello("agent-1");
    h.set_token("agent-secret");
    c.spoil(h);
    SessionId session = 0;
    auto ack = broker.open_session(h, "peer", std::make_shared<FakeAgent>(), session);
    ASSERT_FALSE(ack.ok()) << c.name;
    EXPECT_EQ(ack.status().code(), c.code) << c.name << ": " << ack.status().to_string();
    EXPECT_NE(ack.status().message().find(c.message), std::string::npos) << c.name << ": " << ack.status().message();
  }
  EXPECT_TRUE(broker.list_devices("").agents().empty());
}

TEST(TrackerBadInput, AgentMessagesThatBreakTheProtocolAndTheBrokerStillServes) {
  Broker broker(strict_options());
  auto agent = std::make_shared<FakeAgent>();
  v1::AgentHello h = hello("agent-1");
  h.set_token("agent-secret");
  SessionId session = 0;
  ASSERT_TRUE(broker.open_session(h, "peer", agent, session).ok());

  v1::AgentMessage empty;
  Status s = broker.on_agent_message(session, empty);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("no content"), std::string::npos) << s.message();

  v1::AgentMessage second_hello;
  *second_hello.mutable_hello() = h;
  s = broker.on_agent_message(session, second_hello);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("second hello"), std::string::npos) << s.message();

  v1::AgentMessage stray_done;
  stray_done.mutable_batch_done()->set_lease_id("no-such-lease");
  s = broker.on_agent_message(session, stray_done);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("no-such-lease"), std::string::npos) << s.message();

  s = broker.on_agent_message(session + 100, empty);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("session"), std::string::npos) << s.message();

  // The same broker still leases a good request and delivers its results.
  auto tuner = std::make_shared<FakeTuner>();
  ASSERT_TRUE(broker.submit(good_request(), tuner).ok());
  ASSERT_FALSE(agent->batches.empty());
  const v1::LeasedBatch batch = agent->batches.back();
  for (int i = 0; i < batch.candidates_size(); ++i) ASSERT_TRUE(broker.on_agent_message(session, result_for(batch, i)).ok());
  EXPECT_EQ(tuner->results.size(), 2u);
  EXPECT_EQ(tuner->finished, 1);
}

}  // namespace
}  // namespace tunefarm
