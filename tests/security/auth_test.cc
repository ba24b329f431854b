// Tokens on tunerd and trackerd, with real processes: a call without a token is UNAUTHENTICATED, a read-only
// token may query but not submit, cancel or import (PERMISSION_DENIED), a client token may do
// everything, tune-client passes --token or $TUNEFARM_TOKEN, and no token reaches a log.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/wire/credentials.h"
#include "common/wire/wire.h"
#include "tests/integration/http_harness.h"
#include "tests/integration/farm_harness.h"
#include "tunefarm/v1/tuner.grpc.pb.h"

namespace tunefarm::testing {
namespace {

constexpr const char* kClientToken = "client-7f3a9c";
constexpr const char* kReadOnlyToken = "reader-51be02";

class SecurityAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    farm_ = std::make_unique<Farm>();
    farm_->start_agent("agent-1");
    ASSERT_TRUE(farm_->wait_for_agents("local-cpu", 1, std::chrono::seconds(20))) << farm_->logs();
    address_ = fmt::format("127.0.0.1:{}", free_port());
    tunerd_ = std::make_unique<Process>(
        bin_path("tunerd"),
        std::vector<std::string>{"--listen", address_, "--tracker", farm_->address(), "--data-dir",
                                 farm_->log_dir() + "/tunerd-data", "--client-token-file", secret_file(kClientToken),
                                 "--read-only-token-file", secret_file(kReadOnlyToken), "--build-threads", "1", "--log-level", "debug"},
        farm_->log_dir() + "/tunerd.log");
    auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20)))
        << tunerd_->log();
    stub_ = v1::Tuner::NewStub(channel);
  }

  static void with_token(grpc::ClientContext& context, const std::string& token) {
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  }
  grpc::Status submit(const std::string& token, v1::Job* job = nullptr) {
    v1::SubmitJobRequest request;
    v1::JobSpec& spec = *request.mutable_spec();
    *spec.add_tasks()->mutable_workload() = to_proto(*parse_workload("matmul:M=32,N=32,K=32"));
    *spec.mutable_target() = to_proto(*parse_target("llvm"));
    spec.set_device_key("local-cpu");
    spec.set_trials(4);
    spec.set_batch_size(4);
    grpc::ClientContext context;
    with_token(context, token);
    v1::SubmitJobResponse response;
    grpc::Status s = stub_->SubmitJob(&context, request, &response);
    if (job) *job = response.job();
    return s;
  }
  grpc::Status list(const std::string& token) {
    grpc::ClientContext context;
    with_token(context, token);
    v1::ListJobsResponse response;
    return stub_->ListJobs(&context, v1::ListJobsRequest(), &response);
  }
  grpc::Status cancel(const std::string& token, const std::string& id) {
    grpc::ClientContext context;
    with_token(context, token);
    v1::CancelJobRequest request;
    request.set_job_id(id);
    v1::Job job;
    return stub_->CancelJob(&context, request, &job);
  }
  grpc::Status import(const std::string& token) {
    grpc::ClientContext context;
    with_token(context, token);
    v1::ImportRecordsResponse response;
    auto writer = stub_->ImportRecords(&context, &response);
    writer->WritesDone();
    return writer->Finish();
  }
  // Runs tune-client with `env` prepended; its exit code and what it printed.
  std::pair<int, std::string> client(const std::string& env, const std::string& args) {
    std::string command = fmt::format("{} {} --server {} --tracker {} {} 2>&1", env, bin_path("tune-client"),
                                      address_, farm_->address(), args);
    FILE* pipe = popen(command.c_str(), "r");
    std::string out;
    char buffer[512];
    while (pipe && fgets(buffer, sizeof buffer, pipe)) out += buffer;
    int status = pipe ? pclose(pipe) : -1;
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
  }

  std::unique_ptr<Farm> farm_;
  std::string address_;
  std::unique_ptr<Process> tunerd_;
  std::unique_ptr<v1::Tuner::Stub> stub_;
};

TEST_F(SecurityAuthTest, TokensDecideWhoMaySubmitCancelAndQuery) {
  grpc::Status none = submit("");
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(none.error_message().find("requires a token"), std::string::npos) << none.error_message();
  EXPECT_EQ(list("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status wrong = list("guess");
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(wrong.error_message().find("not one this tunerd knows"), std::string::npos) << wrong.error_message();

  v1::Job job;
  ASSERT_TRUE(submit(kClientToken, &job).ok()) << tunerd_->log();
  EXPECT_TRUE(list(kReadOnlyToken).ok());
  grpc::Status denied = submit(kReadOnlyToken);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(denied.error_message().find("read-only"), std::string::npos) << denied.error_message();
  grpc::Status cancel_denied = cancel(kReadOnlyToken, job.id());
  EXPECT_EQ(cancel_denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(cancel_denied.error_message().find("CancelJob"), std::string::npos) << cancel_denied.error_message();
  EXPECT_EQ(import(kReadOnlyToken).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  grpc::Status cancelled = cancel(kClientToken, job.id());
  EXPECT_TRUE(cancelled.ok() || cancelled.error_code() == grpc::StatusCode::FAILED_PRECONDITION)
      << cancelled.error_message();
}

// Compiling a library holds tunerd's one build lock for seconds per workload: a read-only token
// may not make it do that.
TEST_F(SecurityAuthTest, BuildingALibraryTakesAClientToken) {
  v1::BuildLibraryRequest request;
  *request.add_workloads() = to_proto(*parse_workload("matmul:M=32,N=32,K=32"));
  *request.mutable_target() = to_proto(*parse_target("llvm"));
  grpc::ClientContext context;
  with_token(context, kReadOnlyToken);
  auto reader = stub_->BuildLibrary(&context, request);
  v1::LibraryChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
}

// Every WatchJob stream holds a thread of tunerd's while its job runs: one token has at most 64.
TEST_F(SecurityAuthTest, OneTokenCannotOpenWatchStreamsWithoutBound) {
  v1::Job job;
  v1::SubmitJobRequest request;
  v1::JobSpec& spec = *request.mutable_spec();
  *spec.add_tasks()->mutable_workload() = to_proto(*parse_workload("matmul:M=32,N=32,K=32"));
  *spec.mutable_target() = to_proto(*parse_target("llvm"));
  spec.set_device_key("local-cpu");
  spec.set_trials(100000);
  {
    grpc::ClientContext context;
    with_token(context, kClientToken);
    v1::SubmitJobResponse response;
    ASSERT_TRUE(stub_->SubmitJob(&context, request, &response).ok()) << tunerd_->log();
    job = response.job();
  }
  v1::WatchJobRequest watch;
  watch.set_job_id(job.id());
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::JobEvent>>> streams;
  grpc::Status refused;
  for (int i = 0; i < 65; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    with_token(*contexts.back(), kReadOnlyToken);
    streams.push_back(stub_->WatchJob(contexts.back().get(), watch));
    v1::JobEvent event;
    if (!streams.back()->Read(&event)) {
      refused = streams.back()->Finish();
      break;
    }
  }
  EXPECT_EQ(streams.size(), 65u);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  // Another token still may.
  grpc::ClientContext other;
  with_token(other, kClientToken);
  auto stream = stub_->WatchJob(&other, watch);
  v1::JobEvent event;
  EXPECT_TRUE(stream->Read(&event));
  other.TryCancel();
  stream->Finish();
  for (auto& context : contexts) context->TryCancel();
  for (size_t i = 0; i + 1 < streams.size(); ++i) streams[i]->Finish();
  EXPECT_TRUE(cancel(kClientToken, job.id()).ok());
}

// The peak resident memory of a process, in MiB (VmHWM).
double peak_rss_mib(pid_t pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  return -1;
}

TEST_F(SecurityAuthTest, UnauthenticatedCallsAreRefusedBeforeTheirBodyIsBuffered) {
  // Eight 60 MiB requests at once without a token: each buffered whole would add ~480 MiB.
  v1::SubmitJobRequest request;
  request.mutable_spec()->set_device_key(std::string(60 << 20, 'k'));
  ASSERT_TRUE(list(kClientToken).ok());
  double before = peak_rss_mib(tunerd_->pid());
  ASSERT_GT(before, 0);
  std::vector<std::thread> callers;
  std::vector<grpc::Status> answers(8);
  for (size_t i = 0; i < answers.size(); ++i)
    callers.emplace_back([&, i] {
      grpc::ClientContext context;
      with_token(context, i % 2 ? "not-a-token" : "");
      v1::SubmitJobResponse response;
      answers[i] = stub_->SubmitJob(&context, request, &response);
    });
  for (auto& caller : callers) caller.join();
  for (const grpc::Status& answer : answers)
    EXPECT_EQ(answer.error_code(), grpc::StatusCode::UNAUTHENTICATED) << answer.error_message();
  double growth = peak_rss_mib(tunerd_->pid()) - before;
  std::cout << fmt::format("tunerd's peak RSS: {:.0f} MiB before, +{:.0f} MiB after 8 unauthenticated 60 MiB calls\n",
                           before, growth);
  EXPECT_LT(growth, 100);
  // A client token still submits.
  EXPECT_TRUE(submit(kClientToken).ok()) << tunerd_->log();
}

// trackerd: a Measure request may carry a GiB of artifacts. Those without any of the farm's tokens
// in their metadata are refused by its gate before they are read; the service counts each call it
// refused after reading it (tunefarm_tracker_calls_refused_total), and sees none of them.
TEST(TrackerAuth, UnauthenticatedCallsAreRefusedBeforeTheirBodyIsBuffered) {
  int metrics_port = free_port();
  Farm farm({"--agent-token-file", secret_file("agent-secret"), "--tuner-token-file", secret_file("tuner-secret"),
             "--reader-token-file", secret_file("reader-secret"), "--metrics-listen",
             fmt::format("127.0.0.1:{}", metrics_port)});
  auto refused_after_reading = [&] {
    return scrape(metrics_port, "tuner-secret").sum("tunefarm_tracker_calls_refused_total", {{"rpc", "Measure"}});
  };
  auto measure = [&](const v1::MeasureRequest& request, const std::string& token) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    add_bearer(context, token);
    auto reader = farm.stub()->Measure(&context, request);
    v1::MeasureResponse response;
    while (reader->Read(&response)) {
    }
    return reader->Finish();
  };
  ASSERT_EQ(refused_after_reading(), 0) << farm.logs();

  // Eight 60 MiB requests at once, without a token or with a wrong one (the request's own token
  // field right, as an old client would send it): each buffered whole would add ~480 MiB.
  v1::MeasureRequest big = kernel_request("matmul", 1);
  big.set_token("tuner-secret");
  big.mutable_candidates(0)->mutable_artifact()->set_data(std::string(60 << 20, 'x'));
  double before = peak_rss_mib(farm.tracker().pid());
  ASSERT_GT(before, 0);
  std::vector<std::thread> callers;
  std::vector<grpc::Status> answers(8);
  for (size_t i = 0; i < answers.size(); ++i)
    callers.emplace_back([&, i] { answers[i] = measure(big, i % 2 ? "not-a-token" : ""); });
  for (auto& caller : callers) caller.join();
  for (size_t i = 0; i < answers.size(); ++i) {
    EXPECT_EQ(answers[i].error_code(), grpc::StatusCode::UNAUTHENTICATED) << answers[i].error_message();
    EXPECT_NE(answers[i].error_message().find(i % 2 ? "not one this trackerd knows" : "requires a token"),
              std::string::npos)
        << answers[i].error_message();
  }
  double growth = peak_rss_mib(farm.tracker().pid()) - before;
  std::cout << fmt::format("trackerd's peak RSS: {:.0f} MiB before, +{:.0f} MiB after 8 unauthenticated 60 MiB calls\n",
                           before, growth);
  EXPECT_LT(growth, 100);
  EXPECT_EQ(refused_after_reading(), 0) << "an unauthenticated request reached the service";

  // A reader token passes the gate (it is one of the farm's) but not Measure's check: read, refused
  // and counted.
  grpc::Status reader = measure(kernel_request("matmul", 1), "reader-secret");
  EXPECT_EQ(reader.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(reader.error_message().find("Measure needs the tuner token"), std::string::npos) << reader.error_message();
  EXPECT_EQ(refused_after_reading(), 1);
}

TEST_F(SecurityAuthTest, TuneClientSendsItsTokenFromAFileOrTheEnvironmentNeverTheCommandLine) {
  auto [refused, refused_out] = client("", "jobs");
  EXPECT_NE(refused, 0);
  EXPECT_NE(refused_out.find("requires a token"), std::string::npos) << refused_out;
  auto [by_env, by_env_out] = client(fmt::format("TUNEFARM_TOKEN={}", kReadOnlyToken), "jobs");
  EXPECT_EQ(by_env, 0) << by_env_out;
  auto [by_file, by_file_out] = client("", fmt::format("--token-file {} jobs", secret_file(kReadOnlyToken)));
  EXPECT_EQ(by_file, 0) << by_file_out;
  // On the command line, any process of the host could read it in /proc/PID/cmdline.
  auto [by_flag, by_flag_out] = client("", fmt::format("--token {} jobs", kReadOnlyToken));
  EXPECT_EQ(by_flag, 2) << by_flag_out;
  // The tracker's devices listing needs no tunerd token and must not be sent one.
  auto [devices, devices_out] = client(fmt::format("TUNEFARM_TOKEN={}", kClientToken), "devices");
  EXPECT_EQ(devices, 0) << devices_out;
}

TEST_F(SecurityAuthTest, TokensNeverReachTheLogs) {
  submit(kClientToken);
  submit(kReadOnlyToken);
  list("guess");
  std::string logs = tunerd_->log() + farm_->logs();
  EXPECT_EQ(logs.find(kClientToken), std::string::npos);
  EXPECT_EQ(logs.find(kReadOnlyToken), std::string::npos);
}

}  // namespace
}  // namespace tunefarm::testing
