// tunerd as a real process beside a Farm, driven through the Tuner service, and tune-client as a
// command line: shared by the integration tests of the service and of what it builds.
#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/wire/wire.h"
#include "tests/integration/farm_harness.h"
#include "tunefarm/v1/tuner.grpc.pb.h"

namespace tunefarm::testing {

class Tunerd {
 public:
  // `extra_args` go after the harness's own (--metrics-listen, --http-listen, tokens...).
  Tunerd(const Farm& farm, std::string data_dir, std::vector<std::string> extra_args = {})
      : farm_(farm), data_dir_(std::move(data_dir)), extra_args_(std::move(extra_args)) {
    start();
  }

  void start() {
    // A restarted tunerd comes back on its port, as a service would.
    if (port_ == 0) port_ = free_port();
    address_ = fmt::format("127.0.0.1:{}", port_);
    std::vector<std::string> args{"--listen", address_, "--tracker", farm_.address(), "--data-dir", data_dir_,
                                  "--build-threads", "1", "--log-level", "info"};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    process_ = std::make_unique<Process>(bin_path("tunerd"), args,
                                         fmt::format("{}/tunerd-{}.log", farm_.log_dir(), ++starts_));
    channel_ = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    ASSERT_TRUE(channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20)))
        << process_->log();
  }
  void stop() {
    process_->signal(SIGTERM);
    process_->wait();
  }
  void kill9() {
    process_->signal(SIGKILL);
    process_->wait();
  }

  std::unique_ptr<v1::Tuner::Stub> stub() const { return v1::Tuner::NewStub(channel_); }
  const std::string& address() const { return address_; }
  std::string log() const { return process_->log(); }

  StatusOr<v1::Job> submit(const std::string& workload, int trials, int batch = 16) const {
    v1::JobSpec spec;
    *spec.add_tasks()->mutable_workload() = to_proto(*parse_workload(workload));
    *spec.mutable_target() = to_proto(*parse_target("llvm"));
    spec.set_device_key("local-cpu");
    spec.set_trials(trials);
    spec.set_batch_size(batch);
    return submit(spec);
  }

  StatusOr<v1::Job> submit(const v1::JobSpec& spec) const {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    grpc::ClientContext context;
    v1::SubmitJobResponse response;
    grpc::Status s = stub()->SubmitJob(&context, request, &response);
    if (!s.ok()) return from_grpc(s);
    return response.job();
  }

  // Follows WatchJob until the job ends; the last state seen.
  v1::Job get(const std::string& job_id) const {
    grpc::ClientContext context;
    v1::GetJobRequest request;
    request.set_job_id(job_id);
    v1::Job job;
    EXPECT_TRUE(stub()->GetJob(&context, request, &job).ok());
    return job;
  }
  pid_t pid() const { return process_->pid(); }

  v1::Job watch(const std::string& job_id) const {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    auto reader = stub()->WatchJob(&context, request);
    v1::JobEvent event;
    v1::Job last;
    while (reader->Read(&event)) last = event.job();
    EXPECT_TRUE(reader->Finish().ok());
    return last;
  }

  std::vector<v1::Record> records(const std::string& job_id) const {
    grpc::ClientContext context;
    v1::ListRecordsRequest request;
    request.set_job_id(job_id);
    request.set_limit(10000);
    v1::ListRecordsResponse response;
    EXPECT_TRUE(stub()->ListRecords(&context, request, &response).ok());
    return {response.records().begin(), response.records().end()};
  }

  std::vector<v1::Record> best(const std::string& workload, int top_k = 1) const {
    grpc::ClientContext context;
    v1::QueryBestRequest request;
    *request.mutable_workload() = to_proto(*parse_workload(workload));
    *request.mutable_target() = to_proto(*parse_target("llvm"));
    request.set_top_k(top_k);
    v1::QueryBestResponse response;
    EXPECT_TRUE(stub()->QueryBest(&context, request, &response).ok());
    return {response.records().begin(), response.records().end()};
  }

 private:
  const Farm& farm_;
  std::string data_dir_;
  std::vector<std::string> extra_args_;
  int port_ = 0;
  int starts_ = 0;
  std::string address_;
  std::unique_ptr<Process> process_;
  std::shared_ptr<grpc::Channel> channel_;
};


// Runs tune-client with `args`; its stdout.
inline std::string tune_client(const std::vector<std::string>& args, int* exit_code) {
  std::string cmd = bin_path("tune-client");
  for (const auto& a : args) cmd += " '" + a + "'";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  int status = p ? pclose(p) : -1;
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// Runs tune-client with `args`; its exit code, and what it wrote to stdout and stderr together.
inline std::pair<int, std::string> tune_client_output(const Farm& farm, const std::vector<std::string>& args,
                                                      const std::string& name) {
  Process client(bin_path("tune-client"), args, farm.log_dir() + "/client-" + name + ".log");
  int status = client.wait();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, client.log()};
}

}  // namespace tunefarm::testing
