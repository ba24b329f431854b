// libFuzzer target for the tracker broker's request handling: a fuzzed sequence of agent hellos,
// agent messages (heartbeats, results, batch ends, for real or made-up leases), Measure requests
// (checked by validate_measure_request first, as the service does), cancellations, session ends,
// clock ticks and drains. Beyond "no crash", it checks the broker's promise: every accepted
// request gets exactly one result per candidate, then one finish, and nothing after.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>
#include <spdlog/spdlog.h>

#include "tracker/broker.h"

namespace tunefarm {
namespace {

[[noreturn]] void broken(const std::string& why) {
  std::fprintf(stderr, "broker promise broken: %s\n", why.c_str());
  std::abort();
}

struct FakeAgent : AgentChannel {
  std::vector<v1::LeasedBatch> batches;
  bool closed = false;
  void send_batch(v1::LeasedBatch batch) override { batches.push_back(std::move(batch)); }
  void close(const Status&) override { closed = true; }
};

struct FakeTuner : TunerChannel {
  std::set<uint64_t> expected;
  std::set<uint64_t> answered;
  bool finished = false;
  void send_result(v1::MeasureResponse response) override {
    if (finished) broken("a result after finish");
    if (!expected.count(response.candidate_id())) broken("a result for a candidate never sent");
    if (!answered.insert(response.candidate_id()).second) broken("two results for one candidate");
  }
  void finish() override {
    if (finished) broken("finish twice");
    if (answered != expected) broken("finish before every candidate has its result");
    finished = true;
  }
};

const char* const kKeys[] = {"cpu", "gpu", "arm"};
const char* const kTokens[] = {"", "agent-secret", "tuner-secret"};

std::string pick_name(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 3: return in.ConsumeRandomLengthString(140);
    default: return kKeys[in.ConsumeIntegralInRange(0, 2)];
  }
}

v1::Artifact make_artifact(FuzzedDataProvider& in) {
  v1::Artifact a;
  a.set_format(static_cast<v1::Artifact::Format>(in.ConsumeIntegralInRange(0, 3)));
  a.set_data(in.ConsumeRandomLengthString(64));
  a.set_entry_symbol(in.ConsumeBool() ? "entry" : "");
  int args = in.ConsumeIntegralInRange(0, 3);
  for (int i = 0; i < args; ++i) {
    auto* arg = a.add_args();
    arg->set_name("A");
    arg->add_shape(in.ConsumeIntegral<int64_t>());
    arg->set_dtype(static_cast<v1::DType>(in.ConsumeIntegralInRange(0, 8)));
  }
  return a;
}

v1::MeasureRequest make_request(FuzzedDataProvider& in) {
  v1::MeasureRequest r;
  r.set_device_key(pick_name(in));
  r.set_priority(in.ConsumeIntegral<int32_t>());
  r.set_job_id(in.ConsumeBool() ? "job-1" : in.ConsumeRandomLengthString(140));
  r.set_token(kTokens[in.ConsumeIntegralInRange(0, 2)]);
  auto* w = r.mutable_workload();
  w->set_op(in.ConsumeBool() ? "matmul" : in.ConsumeRandomLengthString(16));
  for (const char* p : {"M", "N", "K"}) {
    if (in.ConsumeIntegralInRange(0, 7) == 0) continue;
    auto* param = w->add_params();
    param->set_name(p);
    param->set_value(in.ConsumeBool() ? 64 : in.ConsumeIntegral<int64_t>());
  }
  w->set_dtype(static_cast<v1::DType>(in.ConsumeIntegralInRange(0, 8)));
  auto* o = r.mutable_options();
  o->set_number(in.ConsumeIntegral<int32_t>());
  o->set_repeat(in.ConsumeIntegral<int32_t>());
  o->set_min_repeat_ms(in.ConsumeIntegral<int32_t>());
  o->set_timeout_s(in.ConsumeBool() ? in.ConsumeFloatingPoint<double>() : in.ConsumeIntegralInRange(0, 20));
  o->set_check_correctness(in.ConsumeBool());
  if (in.ConsumeBool()) *r.mutable_reference() = make_artifact(in);
  int candidates = in.ConsumeIntegralInRange(0, 12);
  for (int i = 0; i < candidates; ++i) {
    auto* c = r.add_candidates();
    c->set_id(in.ConsumeBool() ? static_cast<uint64_t>(i) : in.ConsumeIntegralInRange<uint64_t>(0, 16));
    *c->mutable_artifact() = make_artifact(in);
  }
  return r;
}

}  // namespace
}  // namespace tunefarm

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tunefarm;
  FuzzedDataProvider in(data, size);
  auto now = std::make_shared<BrokerClock::time_point>(BrokerClock::time_point{} + std::chrono::hours(1));
  BrokerOptions options;
  options.max_lease_candidates = 4;
  options.min_lease_candidates = 2;
  options.max_candidates = 10;
  options.max_artifact_bytes = 48;
  if (in.ConsumeBool()) options.agent_token = "agent-secret";
  if (in.ConsumeBool()) options.tuner_token = "tuner-secret";
  options.clock = [now] { return *now; };
  Broker broker(options);

  struct Session {
    SessionId id;
    std::shared_ptr<FakeAgent> channel;
  };
  std::vector<Session> sessions;
  std::vector<std::pair<RequestId, std::shared_ptr<FakeTuner>>> requests;

  while (in.remaining_bytes() > 0) {
    switch (in.ConsumeIntegralInRange(0, 8)) {
      case 0: {
        v1::AgentHello hello;
        hello.set_agent_id(in.ConsumeBool() ? "agent-" + std::to_string(in.ConsumeIntegralInRange(0, 3))
                                            : in.ConsumeRandomLengthString(140));
        hello.set_device_key(pick_name(in));
        hello.set_token(kTokens[in.ConsumeIntegralInRange(0, 2)]);
        auto channel = std::make_shared<FakeAgent>();
        SessionId id = 0;
        if (broker.open_session(hello, "127.0.0.1:1", channel, id).ok()) sessions.push_back({id, channel});
        break;
      }
      case 1:
      case 2: {
        if (sessions.empty()) break;
        Session& s = sessions[in.ConsumeIntegralInRange<size_t>(0, sessions.size() - 1)];
        const v1::LeasedBatch* batch =
            s.channel->batches.empty()
                ? nullptr
                : &s.channel->batches[in.ConsumeIntegralInRange<size_t>(0, s.channel->batches.size() - 1)];
        std::string lease = batch && in.ConsumeBool() ? batch->lease_id() : in.ConsumeRandomLengthString(12);
        v1::AgentMessage message;
        switch (in.ConsumeIntegralInRange(0, 3)) {
          case 0:
            message.mutable_heartbeat()->set_lease_id(lease);
            break;
          case 1: {
            auto* result = message.mutable_result();
            result->set_lease_id(lease);
            uint64_t id = batch && batch->candidates_size() > 0 && in.ConsumeBool()
                              ? batch->candidates(in.ConsumeIntegralInRange(0, batch->candidates_size() - 1)).id()
                              : in.ConsumeIntegral<uint64_t>();
            result->set_candidate_id(id);
            result->mutable_result()->set_error(static_cast<v1::ErrorCode>(in.ConsumeIntegralInRange(0, 12)));
            result->mutable_result()->add_costs(in.ConsumeFloatingPoint<double>());
            break;
          }
          case 2:
            message.mutable_batch_done()->set_lease_id(lease);
            break;
          default:
            message.mutable_hello()->set_agent_id("again");
        }
        if (!broker.on_agent_message(s.id, message).ok()) broker.close_session(s.id, "protocol error");
        break;
      }
      case 3: {
        v1::MeasureRequest request = make_request(in);
        if (!validate_measure_request(request, broker.options()).ok()) break;
        auto tuner = std::make_shared<FakeTuner>();
        for (const auto& c : request.candidates()) tuner->expected.insert(c.id());
        auto id = broker.submit(request, tuner);
        if (id.ok()) requests.emplace_back(*id, tuner);
        break;
      }
      case 4:
        *now += std::chrono::milliseconds(in.ConsumeIntegralInRange(0, 40000));
        broker.tick();
        break;
      case 5:
        if (!sessions.empty()) {
          size_t i = in.ConsumeIntegralInRange<size_t>(0, sessions.size() - 1);
          broker.close_session(sessions[i].id, "stream ended");
          sessions.erase(sessions.begin() + static_cast<long>(i));
        }
        break;
      case 6:
        if (!requests.empty()) {
          size_t i = in.ConsumeIntegralInRange<size_t>(0, requests.size() - 1);
          broker.cancel(requests[i].first);
          requests.erase(requests.begin() + static_cast<long>(i));
        }
        break;
      case 7:
        broker.queue_status(in.ConsumeBool() ? "" : pick_name(in));
        broker.list_devices(in.ConsumeBool() ? "" : pick_name(in));
        break;
      default:
        if (in.ConsumeIntegralInRange(0, 7) == 0) {
          broker.begin_drain();
          broker.fail_all("draining");
        }
    }
  }
  // Whatever is still open must end in results: fail_all answers every remaining candidate.
  broker.fail_all("the fuzz run ended");
  for (const auto& [id, tuner] : requests)
    if (!tuner->finished) broken("a request left without its results after fail_all");
  return 0;
}
