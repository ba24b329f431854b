// A submit that names its request (SubmitJobRequest.request_id) through tunerd's gRPC service: sent
// again it answers the job it made, also while that job is still being set up and when the queue
// has filled meanwhile; another spec under the id is refused naming the job; and one client's
// request ids never reach another client's jobs.
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/wire/wire.h"
#include "tests/search/fakes.h"
#include "tuner/service.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

double flat(const Point&) { return 10.0; }

// Makes fake tasks; while `hold` is set, making one waits until it is cleared (a submit still being
// set up, as a slow compiler makes it).
class HeldTasks : public TaskFactory {
 public:
  StatusOr<std::unique_ptr<TuningTask>> make_task(const Workload& w, const Target&, const std::string&) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++making_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return !hold_; });
    return std::unique_ptr<TuningTask>(std::make_unique<FakeTask>(std::vector<int64_t>{8, 8}, flat, w.to_string()));
  }
  void hold(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = on;
    changed_.notify_all();
  }
  void wait_until_making(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return making_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool hold_ = false;
  int making_ = 0;
};

class SubmitRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("submit-" + std::to_string(::getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    store_ = db::RecordStore::open((dir_ / "history.db").string()).value();
    JobManagerOptions options;
    options.max_running_jobs = 1;
    options.max_queued_jobs = 1;
    // A job that starts holds its slot until the test ends (it fails then, for want of a backend).
    jobs_ = std::make_unique<JobManager>(
        *store_, tasks_,
        [this](const v1::Job&) -> StatusOr<std::unique_ptr<MeasureBackend>> {
          std::unique_lock<std::mutex> lock(mu_);
          ended_.wait(lock, [&] { return ending_; });
          return unavailable("the test ended");
        },
        nullptr, options);
    service_ = std::make_unique<TunerService>(*jobs_, *store_, AccessTokens{{"token-of-alice", "token-of-bob"}, {}});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    stub_ = v1::Tuner::NewStub(grpc::CreateChannel(fmt::format("127.0.0.1:{}", port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    tasks_.hold(false);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ending_ = true;
      ended_.notify_all();
    }
    server_->Shutdown();
    jobs_->shutdown();
    service_.reset();
    jobs_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  static v1::JobSpec spec(int trials) {
    v1::JobSpec s;
    *s.add_tasks()->mutable_workload() = to_proto(*parse_workload("matmul:M=8,N=8,K=8"));
    *s.mutable_target() = to_proto(*parse_target("llvm"));
    s.set_device_key("local-cpu");
    s.set_trials(trials);
    return s;
  }

  // SubmitJob as `token`'s client; the job's id, or the error as "CODE: message".
  std::string submit(const std::string& token, const std::string& request_id, int trials = 8) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + token);
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec(trials);
    request.set_request_id(request_id);
    v1::SubmitJobResponse response;
    grpc::Status status = stub_->SubmitJob(&context, request, &response);
    if (!status.ok()) return fmt::format("{}: {}", static_cast<int>(status.error_code()), status.error_message());
    return response.job().id();
  }

  size_t jobs_stored() { return store_->list_jobs({}).value().size(); }

  std::filesystem::path dir_;
  std::unique_ptr<db::RecordStore> store_;
  HeldTasks tasks_;
  std::mutex mu_;
  std::condition_variable ended_;
  bool ending_ = false;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<TunerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Tuner::Stub> stub_;
};

TEST_F(SubmitRequestTest, ASubmitSentAgainGetsTheSameJobEvenWithTheQueueFull) {
  std::string first = submit("token-of-alice", "req-1");
  ASSERT_THAT(first, HasSubstr("job-"));
  // The queue (one running, one waiting) fills up; the resubmit is not a new job, so it is let in.
  ASSERT_THAT(submit("token-of-alice", ""), HasSubstr("job-"));
  ASSERT_THAT(submit("token-of-alice", ""), HasSubstr("--max-queued-jobs"));
  EXPECT_EQ(submit("token-of-alice", "req-1"), first);
  EXPECT_EQ(jobs_stored(), 2u);
}

TEST_F(SubmitRequestTest, AnotherSpecUnderTheSameRequestIdIsRefusedNamingTheJob) {
  std::string first = submit("token-of-alice", "req-1");
  ASSERT_THAT(first, HasSubstr("job-"));
  std::string refused = submit("token-of-alice", "req-1", 16);
  EXPECT_THAT(refused, HasSubstr(fmt::format("{}:", static_cast<int>(grpc::StatusCode::ALREADY_EXISTS))));
  EXPECT_THAT(refused, HasSubstr(first));
  EXPECT_THAT(submit("token-of-alice", "bad id"), HasSubstr("printable ASCII"));
  EXPECT_EQ(jobs_stored(), 1u);
}

TEST_F(SubmitRequestTest, OneClientsRequestIdNeverReachesAnothersJob) {
  std::string alices = submit("token-of-alice", "req-1");
  ASSERT_THAT(alices, HasSubstr("job-"));
  // Bob guesses Alice's request id: he gets a job of his own, and learns nothing of hers, not even
  // with another spec.
  std::string bobs = submit("token-of-bob", "req-1", 16);
  ASSERT_THAT(bobs, HasSubstr("job-"));
  EXPECT_NE(bobs, alices);
  EXPECT_EQ(submit("token-of-alice", "req-1"), alices);
  EXPECT_EQ(jobs_stored(), 2u);
}

TEST_F(SubmitRequestTest, ASubmitSentAgainWhileTheFirstIsBeingSetUpGetsTheSameJob) {
  tasks_.hold(true);
  auto first = std::async(std::launch::async, [&] { return submit("token-of-alice", "req-1"); });
  auto second = std::async(std::launch::async, [&] { return submit("token-of-alice", "req-1"); });
  // Both are making their tasks (the slow part of a submit) before either has stored a job.
  tasks_.wait_until_making(2);
  tasks_.hold(false);
  std::string a = first.get(), b = second.get();
  ASSERT_THAT(a, HasSubstr("job-"));
  EXPECT_EQ(a, b);
  EXPECT_EQ(jobs_stored(), 1u);
}

}  // namespace
}  // namespace tunefarm
