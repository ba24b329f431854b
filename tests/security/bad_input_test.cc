// Bad input against real daemons on 127.0.0.1: a trackerd (with agent and tuner tokens) and a
// tunerd, driven through their gRPC services. One table row per bad request across every RPC;
// each names the status code and a piece of the message that points at the problem. Afterwards
// both daemons still answer.
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/wire/credentials.h"
#include "common/wire/wire.h"
#include "tests/integration/farm_harness.h"
#include "tunefarm/v1/tuner.grpc.pb.h"

namespace tunefarm::testing {
namespace {

using grpc::StatusCode;

struct Case {
  std::string rpc;
  std::string name;
  std::function<grpc::Status()> call;
  StatusCode code;
  std::string message;
};

v1::JobSpec good_spec() {
  v1::JobSpec spec;
  *spec.add_tasks()->mutable_workload() = to_proto(*parse_workload("matmul:M=64,N=64,K=64"));
  *spec.mutable_target() = to_proto(*parse_target("llvm"));
  spec.set_device_key("local-cpu");
  spec.set_trials(8);
  return spec;
}

v1::MeasureRequest good_measure() {
  v1::MeasureRequest r = kernel_request("matmul", 2);
  r.set_token("tuner-secret");
  return r;
}

class SecurityBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    farm_ = std::make_unique<Farm>(
        std::vector<std::string>{"--agent-token-file", secret_file("agent-secret"), "--tuner-token-file", secret_file("tuner-secret")});
    tracker_ = farm_->stub();
    data_dir_ = farm_->log_dir() + "/tunerd-data";
    std::string address = fmt::format("127.0.0.1:{}", free_port());
    tunerd_ = std::make_unique<Process>(
        bin_path("tunerd"),
        std::vector<std::string>{"--listen", address, "--tracker", farm_->address(), "--data-dir", data_dir_,
                                 "--tracker-token-file", secret_file("tuner-secret"), "--build-threads", "1"},
        farm_->log_dir() + "/tunerd.log");
    auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20)))
        << tunerd_->log();
    tuner_ = v1::Tuner::NewStub(channel);
  }

  // One unary call whose answer does not matter here, only its status.
  template <typename Stub, typename Request, typename Response>
  static grpc::Status unary(Stub& stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                            const Request& request) {
    grpc::ClientContext context;
    Response response;
    return (stub.*method)(&context, request, &response);
  }

  grpc::Status submit(const std::function<void(v1::JobSpec&)>& spoil, bool with_spec = true) {
    v1::SubmitJobRequest request;
    if (with_spec) {
      *request.mutable_spec() = good_spec();
      spoil(*request.mutable_spec());
    }
    return unary(*tuner_, &v1::Tuner::Stub::SubmitJob, request);
  }
  grpc::Status get(const std::string& id) {
    v1::GetJobRequest request;
    request.set_job_id(id);
    return unary(*tuner_, &v1::Tuner::Stub::GetJob, request);
  }
  grpc::Status watch(const std::string& id) {
    v1::WatchJobRequest request;
    request.set_job_id(id);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto reader = tuner_->WatchJob(&context, request);
    v1::JobEvent event;
    while (reader->Read(&event)) {
    }
    return reader->Finish();
  }
  grpc::Status cancel(const std::string& id) {
    v1::CancelJobRequest request;
    request.set_job_id(id);
    return unary(*tuner_, &v1::Tuner::Stub::CancelJob, request);
  }
  grpc::Status list_jobs(const std::vector<int>& states, int limit) {
    v1::ListJobsRequest request;
    for (int s : states) request.add_states(static_cast<v1::JobState>(s));
    request.set_limit(limit);
    return unary(*tuner_, &v1::Tuner::Stub::ListJobs, request);
  }
  grpc::Status best(const std::function<void(v1::QueryBestRequest&)>& spoil) {
    v1::QueryBestRequest request;
    *request.mutable_workload() = to_proto(*parse_workload("matmul:M=64,N=64,K=64"));
    *request.mutable_target() = to_proto(*parse_target("llvm"));
    spoil(request);
    return unary(*tuner_, &v1::Tuner::Stub::QueryBest, request);
  }
  grpc::Status records(const std::function<void(v1::ListRecordsRequest&)>& spoil) {
    v1::ListRecordsRequest request;
    spoil(request);
    return unary(*tuner_, &v1::Tuner::Stub::ListRecords, request);
  }
  grpc::Status export_records(const v1::Workload& workload) {
    v1::ExportRecordsRequest request;
    *request.mutable_workload() = workload;
    grpc::ClientContext context;
    auto reader = tuner_->ExportRecords(&context, request);
    v1::RecordChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }
  grpc::Status build_library(const std::function<void(v1::BuildLibraryRequest&)>& spoil) {
    v1::BuildLibraryRequest request;
    *request.add_workloads() = to_proto(*parse_workload("matmul:M=64,N=64,K=64"));
    *request.mutable_target() = to_proto(*parse_target("llvm"));
    spoil(request);
    grpc::ClientContext context;
    auto reader = tuner_->BuildLibrary(&context, request);
    v1::LibraryChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }
  grpc::Status import_records(const std::string& jsonl) {
    grpc::ClientContext context;
    v1::ImportRecordsResponse response;
    auto writer = tuner_->ImportRecords(&context, &response);
    v1::RecordChunk chunk;
    chunk.set_jsonl(jsonl);
    writer->Write(chunk);
    writer->WritesDone();
    return writer->Finish();
  }
  grpc::Status measure(const std::function<void(v1::MeasureRequest&)>& spoil) {
    v1::MeasureRequest request = good_measure();
    spoil(request);
    return farm_->measure(request).status;
  }
  // One agent session that sends `first` (and nothing more); the status the tracker ends it with.
  grpc::Status session(const std::function<void(v1::AgentMessage&)>& make_first) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::AgentMessage first;
    make_first(first);
    // As device-agent does: the hello's token in the call's metadata too (a first message that is
    // not a hello comes from an agent that holds the token).
    add_bearer(context, first.has_hello() ? first.hello().token() : "agent-secret");
    auto stream = tracker_->AgentSession(&context);
    stream->Write(first);
    stream->WritesDone();
    v1::TrackerMessage reply;
    while (stream->Read(&reply)) {
    }
    return stream->Finish();
  }
  grpc::Status list_devices(const std::string& key) {
    v1::ListDevicesRequest request;
    request.set_device_key(key);
    grpc::ClientContext context;
    farm_->authorize(context);
    v1::ListDevicesResponse response;
    return tracker_->ListDevices(&context, request, &response);
  }
  grpc::Status queue_status(const std::string& key) {
    v1::QueueStatusRequest request;
    request.set_device_key(key);
    grpc::ClientContext context;
    farm_->authorize(context);
    v1::QueueStatusResponse response;
    return tracker_->QueueStatus(&context, request, &response);
  }

  std::vector<Case> cases();

  std::unique_ptr<Farm> farm_;
  std::unique_ptr<v1::Tracker::Stub> tracker_;
  std::string data_dir_;
  std::unique_ptr<Process> tunerd_;
  std::unique_ptr<v1::Tuner::Stub> tuner_;
};

std::vector<Case> SecurityBadInputTest::cases() {
  const auto kInvalid = StatusCode::INVALID_ARGUMENT;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<Case> c;
  auto add_submit = [&](std::string name, std::function<void(v1::JobSpec&)> spoil, std::string message,
                        StatusCode code = StatusCode::INVALID_ARGUMENT) {
    c.push_back({"SubmitJob", std::move(name), [this, spoil] { return submit(spoil); }, code, std::move(message)});
  };
  c.push_back({"SubmitJob", "no spec", [this] { return submit(nullptr, false); }, kInvalid, "no job spec"});
  add_submit("name too long", [](auto& s) { s.set_name(std::string(300, 'n')); }, "job name");
  add_submit("no tasks", [](auto& s) { s.clear_tasks(); }, "no tasks");
  add_submit("65 tasks", [](auto& s) {
    for (int i = 0; i < 64; ++i) *s.add_tasks() = s.tasks(0);
  }, "at most 64");
  add_submit("unknown op", [](auto& s) { s.mutable_tasks(0)->mutable_workload()->set_op("fft"); }, "task 0");
  add_submit("missing K", [](auto& s) { s.mutable_tasks(0)->mutable_workload()->mutable_params()->RemoveLast(); }, "K");
  add_submit("zero M", [](auto& s) { s.mutable_tasks(0)->mutable_workload()->mutable_params(0)->set_value(0); }, "M");
  add_submit("huge N", [](auto& s) {
    s.mutable_tasks(0)->mutable_workload()->mutable_params(1)->set_value(int64_t{1} << 40);
  }, "N");
  add_submit("bad dtype", [](auto& s) { s.mutable_tasks(0)->mutable_workload()->set_dtype(static_cast<v1::DType>(77)); },
             "dtype");
  add_submit("template with slash", [](auto& s) { s.mutable_tasks(0)->set_template_name("../x"); }, "template name");
  add_submit("unknown template", [](auto& s) { s.mutable_tasks(0)->set_template_name("matmul.cpu.nonesuch"); },
             "nonesuch");
  add_submit("negative weight", [](auto& s) { s.mutable_tasks(0)->set_weight(-1); }, "weight");
  add_submit("NaN weight", [nan](auto& s) { s.mutable_tasks(0)->set_weight(nan); }, "weight");
  add_submit("unknown target kind", [](auto& s) { s.mutable_target()->set_kind("opencl"); }, "opencl");
  add_submit("cuda arch too old", [](auto& s) {
    s.mutable_target()->set_kind("cuda");
    s.mutable_target()->set_arch("sm_50");
  }, "sm_50");
  add_submit("empty device key", [](auto& s) { s.clear_device_key(); }, "device key is empty");
  add_submit("device key with space", [](auto& s) { s.set_device_key("local cpu"); }, "device key");
  add_submit("unknown device key", [](auto& s) { s.set_device_key("no-such-board"); }, "no-such-board");
  add_submit("zero trials", [](auto& s) { s.set_trials(0); }, "trials 0");
  add_submit("negative trials", [](auto& s) { s.set_trials(-5); }, "trials -5");
  add_submit("too many trials", [](auto& s) { s.set_trials(2'000'000); }, "trials 2000000");
  add_submit("negative time budget", [](auto& s) { s.set_time_budget_s(-1); }, "time budget");
  add_submit("NaN time budget", [nan](auto& s) { s.set_time_budget_s(nan); }, "time budget");
  add_submit("negative early stopping", [](auto& s) { s.set_early_stopping(-1); }, "early stopping");
  add_submit("negative batch", [](auto& s) { s.set_batch_size(-1); }, "batch size");
  add_submit("huge batch", [](auto& s) { s.set_batch_size(5000); }, "batch size");
  add_submit("unknown strategy", [](auto& s) { s.set_strategy(static_cast<v1::SearchStrategy>(99)); }, "strategy 99");
  add_submit("priority too high", [](auto& s) { s.set_priority(5000); }, "priority");
  add_submit("negative number", [](auto& s) { s.mutable_measure()->set_number(-1); }, "measure.number");
  add_submit("huge repeat", [](auto& s) { s.mutable_measure()->set_repeat(5000); }, "measure.repeat");
  add_submit("huge min_repeat_ms", [](auto& s) { s.mutable_measure()->set_min_repeat_ms(100000); },
             "measure.min_repeat_ms");
  add_submit("timeout over an hour", [](auto& s) { s.mutable_measure()->set_timeout_s(7200); }, "measure.timeout_s");
  add_submit("negative rtol", [](auto& s) { s.mutable_measure()->set_rtol(-1); }, "rtol");

  for (auto [name, id, message] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"empty id", "", "empty"}, {"id too long", std::string(65, 'a'), "longer than 64"},
           {"id with slash", "../etc", "characters"}}) {
    c.push_back({"GetJob", name, [this, id] { return get(id); }, kInvalid, message});
    c.push_back({"WatchJob", name, [this, id] { return watch(id); }, kInvalid, message});
    c.push_back({"CancelJob", name, [this, id] { return cancel(id); }, kInvalid, message});
  }
  c.push_back({"GetJob", "unknown id", [this] { return get("ffff0000"); }, StatusCode::NOT_FOUND, "ffff0000"});
  c.push_back({"WatchJob", "unknown id", [this] { return watch("ffff0000"); }, StatusCode::NOT_FOUND, "ffff0000"});
  c.push_back({"CancelJob", "unknown id", [this] { return cancel("ffff0000"); }, StatusCode::NOT_FOUND, "ffff0000"});

  c.push_back({"ListJobs", "state 99", [this] { return list_jobs({99}, 0); }, kInvalid, "state 99"});
  c.push_back({"ListJobs", "unspecified state", [this] { return list_jobs({0}, 0); }, kInvalid, "state 0"});
  c.push_back({"ListJobs", "negative limit", [this] { return list_jobs({}, -1); }, kInvalid, "limit -1"});
  c.push_back({"ListJobs", "huge limit", [this] { return list_jobs({}, 100000); }, kInvalid, "limit 100000"});

  c.push_back({"QueryBest", "no workload", [this] { return best([](auto& r) { r.clear_workload(); }); }, kInvalid,
               "no workload"});
  c.push_back({"QueryBest", "unknown op", [this] { return best([](auto& r) { r.mutable_workload()->set_op("x"); }); },
               kInvalid, "'x'"});
  c.push_back({"QueryBest", "bad target", [this] { return best([](auto& r) { r.mutable_target()->set_kind("tpu"); }); },
               kInvalid, "tpu"});
  c.push_back({"QueryBest", "negative top_k", [this] { return best([](auto& r) { r.set_top_k(-1); }); }, kInvalid,
               "top_k -1"});
  c.push_back({"QueryBest", "huge top_k", [this] { return best([](auto& r) { r.set_top_k(1000); }); }, kInvalid,
               "top_k 1000"});

  c.push_back({"BuildLibrary", "no workload", [this] { return build_library([](auto& r) { r.clear_workloads(); }); },
               kInvalid, "no workload"});
  c.push_back({"BuildLibrary", "unknown op", [this] {
                 return build_library([](auto& r) { r.mutable_workloads(0)->set_op("x"); });
               }, kInvalid, "'x'"});
  c.push_back({"BuildLibrary", "twice", [this] {
                 return build_library([](auto& r) { *r.add_workloads() = r.workloads(0); });
               }, kInvalid, "given twice"});
  c.push_back({"BuildLibrary", "too many", [this] {
                 return build_library([](auto& r) {
                   for (int i = 0; i < 300; ++i) *r.add_workloads() = r.workloads(0);
                 });
               }, kInvalid, "at most 256"});
  c.push_back({"BuildLibrary", "target LLVM lacks", [this] {
                 return build_library([](auto& r) { r.mutable_target()->set_mtriple("sparc-linux-gnu"); });
               }, kInvalid, "sparc"});
  c.push_back({"BuildLibrary", "name not an identifier", [this] {
                 return build_library([](auto& r) { r.set_name("x; rm -rf /"); });
               }, kInvalid, "C identifier"});
  c.push_back({"BuildLibrary", "untuned with require_tuned", [this] {
                 return build_library([](auto& r) { r.set_require_tuned(true); });
               }, StatusCode::NOT_FOUND, "no successful record"});
  c.push_back({"ListRecords", "bad job id", [this] { return records([](auto& r) { r.set_job_id("a b"); }); }, kInvalid,
               "job id"});
  c.push_back({"ListRecords", "negative limit", [this] { return records([](auto& r) { r.set_limit(-3); }); }, kInvalid,
               "limit -3"});
  c.push_back({"ListRecords", "negative offset", [this] { return records([](auto& r) { r.set_offset(-1); }); },
               kInvalid, "offset -1"});
  c.push_back({"ListRecords", "bad workload",
               [this] { return records([](auto& r) { r.mutable_workload()->set_op("nonesuch"); }); }, kInvalid,
               "nonesuch"});
  v1::Workload zero = to_proto(*parse_workload("matmul:M=64,N=64,K=64"));
  zero.mutable_params(0)->set_value(0);
  c.push_back({"ExportRecords", "zero dimension", [this, zero] { return export_records(zero); }, kInvalid, "M"});
  c.push_back({"ImportRecords", "not JSON", [this] { return import_records("this is not json\n"); }, kInvalid,
               "line 1"});
  c.push_back({"ImportRecords", "record without workload",
               [this] { return import_records("{\"target\":{\"kind\":\"llvm\"}}\n"); }, kInvalid, "line 1"});

  auto add_measure = [&](std::string name, std::function<void(v1::MeasureRequest&)> spoil, std::string message,
                         StatusCode code = StatusCode::INVALID_ARGUMENT) {
    c.push_back({"Measure", std::move(name), [this, spoil] { return measure(spoil); }, code, std::move(message)});
  };
  add_measure("no token", [](auto& r) { r.clear_token(); }, "tuner token", StatusCode::UNAUTHENTICATED);
  add_measure("agent token", [](auto& r) { r.set_token("agent-secret"); }, "tuner token", StatusCode::UNAUTHENTICATED);
  add_measure("bad key", [](auto& r) { r.set_device_key("a/b"); }, "device_key");
  add_measure("no candidates", [](auto& r) { r.clear_candidates(); }, "no candidates");
  add_measure("duplicate ids", [](auto& r) { r.mutable_candidates(1)->set_id(0); }, "appears twice");
  add_measure("bad workload", [](auto& r) { r.mutable_workload()->set_op("nonesuch"); }, "workload");
  add_measure("negative repeat", [](auto& r) { r.mutable_options()->set_repeat(-2); }, "negative");
  add_measure("no reference", [](auto& r) { r.clear_reference(); }, "reference");
  add_measure("artifact without entry", [](auto& r) { r.mutable_candidates(0)->mutable_artifact()->clear_entry_symbol(); },
              "entry symbol");
  add_measure("unknown key", [](auto& r) { r.set_device_key("never-served"); }, "never-served", StatusCode::NOT_FOUND);

  auto add_session = [&](std::string name, std::function<void(v1::AgentMessage&)> make, std::string message,
                         StatusCode code = StatusCode::INVALID_ARGUMENT) {
    c.push_back({"AgentSession", std::move(name), [this, make] { return session(make); }, code, std::move(message)});
  };
  add_session("heartbeat first", [](auto& m) { m.mutable_heartbeat(); }, "first message");
  add_session("no token", [](auto& m) {
    m.mutable_hello()->set_agent_id("a1");
    m.mutable_hello()->set_device_key("cpu");
  }, "agent token", StatusCode::UNAUTHENTICATED);
  add_session("tuner token", [](auto& m) {
    m.mutable_hello()->set_agent_id("a1");
    m.mutable_hello()->set_device_key("cpu");
    m.mutable_hello()->set_token("tuner-secret");
  }, "agent token", StatusCode::UNAUTHENTICATED);
  add_session("bad agent id", [](auto& m) {
    m.mutable_hello()->set_agent_id("a b");
    m.mutable_hello()->set_device_key("cpu");
    m.mutable_hello()->set_token("agent-secret");
  }, "agent_id");
  add_session("empty device key", [](auto& m) {
    m.mutable_hello()->set_agent_id("a1");
    m.mutable_hello()->set_token("agent-secret");
  }, "device_key");

  c.push_back({"ListDevices", "bad key", [this] { return list_devices("bad key"); }, kInvalid, "device_key"});
  c.push_back({"ListDevices", "key too long", [this] { return list_devices(std::string(200, 'k')); }, kInvalid,
               "device_key"});
  c.push_back({"QueueStatus", "bad key", [this] { return queue_status("k\n"); }, kInvalid, "device_key"});
  c.push_back({"QueueStatus", "key too long", [this] { return queue_status(std::string(200, 'k')); }, kInvalid,
               "device_key"});
  return c;
}

TEST_F(SecurityBadInputTest, EveryRpcRefusesBadInputWithAStatusThatNamesTheProblem) {
  // An agent makes local-cpu a key the tracker knows, so that only the spoiled field is at fault.
  farm_->start_agent("agent-1", "local-cpu", {"--token-file", secret_file("agent-secret")});
  ASSERT_TRUE(farm_->wait_for_agents("local-cpu", 1, std::chrono::seconds(20))) << farm_->logs();
  std::vector<Case> table = cases();
  EXPECT_GE(table.size(), 60u);
  std::map<std::string, int> per_rpc;
  for (const Case& c : table) ++per_rpc[c.rpc];
  EXPECT_EQ(per_rpc.size(), 14u) << "every RPC of both services has cases";
  for (const Case& c : table) {
    grpc::Status s = c.call();
    EXPECT_EQ(s.error_code(), c.code) << c.rpc << " / " << c.name << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(c.message), std::string::npos)
        << c.rpc << " / " << c.name << ": '" << s.error_message() << "' does not name '" << c.message << "'";
  }
  // Both daemons still answer, and a good request still goes through each.
  EXPECT_TRUE(queue_status("").ok());
  EXPECT_TRUE(list_jobs({}, 0).ok());
  EXPECT_TRUE(submit([](auto&) {}).ok()) << tunerd_->log();
  MeasureOutcome good = farm_->measure(good_measure());
  EXPECT_TRUE(good.status.ok()) << good.status.error_message();
  EXPECT_EQ(good.results.size(), 2u);
  EXPECT_TRUE(tunerd_->running());
  EXPECT_TRUE(farm_->tracker().running());
}

}  // namespace
}  // namespace tunefarm::testing
