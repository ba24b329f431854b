// The measurement worker's logic driven in this process over a socket pair, as the sandboxed
// worker process serves it over fd 3, without spawning that process: one request, then steps.
#include "measure/worker.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/temp_dir.h"
#include "compiler/runtime/kernel_runtime.h"
#include "measure/worker_channel.h"
#include "tests/measure/test_kernels.h"

namespace tunefarm {
namespace {

class MeasureWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The test kernels resolve the runtime's symbols from this process, as they do in the worker.
    tunefarm_runtime_num_threads();
    auto dir = make_owned_temp_dir("", "tunefarm-worker-test");
    ASSERT_TRUE(dir.ok()) << dir.status().to_string();
    scratch_ = *dir;
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0);
    server_ = std::thread([this] {
      MeasureWorker worker(scratch_, 0, [this](double seconds) {
        std::lock_guard lock(mu_);
        cpu_limits_.push_back(seconds);
        return Status();
      });
      worker.serve(fds_[1]);
      served_ = true;
    });
  }

  void TearDown() override {
    if (fds_[0] >= 0) close(fds_[0]);
    if (server_.joinable()) server_.join();
    close(fds_[1]);
    std::error_code ec;
    std::filesystem::remove_all(scratch_, ec);
  }

  v1::WorkerReport exchange(const google::protobuf::MessageLite& message) {
    v1::WorkerReport reply;
    EXPECT_TRUE(write_frame(fds_[0], message).ok());
    Status got = read_frame(fds_[0], reply, monotonic_ms() + 30'000);
    EXPECT_TRUE(got.ok()) << got.to_string();
    return reply;
  }

  static v1::LeasedBatch request(const std::string& kernel) {
    v1::LeasedBatch r;
    *r.mutable_workload() = testing::test_workload();
    *r.mutable_options() = testing::quick_options();
    *r.add_candidates()->mutable_artifact() = testing::kernel_artifact(kernel);
    return r;
  }

  std::string scratch_;
  int fds_[2] = {-1, -1};
  std::thread server_;
  std::mutex mu_;
  std::vector<double> cpu_limits_;  // Guarded by mu_.
  bool served_ = false;
};

TEST_F(MeasureWorkerTest, SendsTheOutputsThenTimesTheStepsItIsAsked) {
  v1::WorkerReport ran = exchange(request("matmul"));
  ASSERT_FALSE(ran.has_failure()) << ran.failure().error_msg();
  ASSERT_EQ(ran.outputs_size(), 1);
  EXPECT_EQ(ran.outputs(0).size(), 64u * 64u * 4u);
  v1::WorkerStep flush;
  flush.set_flush_cache(true);
  EXPECT_FALSE(exchange(flush).has_failure());
  v1::WorkerStep step;
  step.set_runs(3);
  v1::WorkerReport timed = exchange(step);
  ASSERT_FALSE(timed.has_failure()) << timed.failure().error_msg();
  EXPECT_GT(timed.seconds(), 0);
}

TEST_F(MeasureWorkerTest, RunsAReferenceForItsOutputsAlone) {
  v1::LeasedBatch r = request("matmul");
  r.clear_candidates();
  *r.mutable_reference() = testing::reference_artifact();
  v1::WorkerReport ran = exchange(r);
  ASSERT_FALSE(ran.has_failure()) << ran.failure().error_msg();
  EXPECT_EQ(ran.outputs_size(), 1);
}

TEST_F(MeasureWorkerTest, LimitsTheRequestsCpuTimeByItsTimeout) {
  v1::LeasedBatch r = request("matmul");
  r.mutable_options()->set_timeout_s(4);
  exchange(r);
  double cores = std::max(1u, std::thread::hardware_concurrency());
  std::lock_guard lock(mu_);
  EXPECT_EQ(cpu_limits_, (std::vector<double>{4 * cores + 1}));
}

TEST_F(MeasureWorkerTest, ReportsAKernelWithoutItsSymbolAsALoadError) {
  v1::WorkerReport missing = exchange(request("nosym"));
  EXPECT_EQ(missing.failure().error(), v1::LOAD_ERROR) << missing.failure().error_msg();
}

TEST_F(MeasureWorkerTest, ReportsAFailingKernelAsARuntimeError) {
  v1::WorkerReport failing = exchange(request("failing"));
  EXPECT_EQ(failing.failure().error(), v1::RUNTIME_ERROR) << failing.failure().error_msg();
}

TEST_F(MeasureWorkerTest, AnswersAMalformedFrame) {
  const char garbage[] = {4, 0, 0, 0, '\xff', '\xff', '\xff', '\xff'};
  ASSERT_EQ(write(fds_[0], garbage, sizeof garbage), static_cast<ssize_t>(sizeof garbage));
  v1::WorkerReport reply;
  ASSERT_TRUE(read_frame(fds_[0], reply, monotonic_ms() + 30'000).ok());
  EXPECT_EQ(reply.failure().error(), v1::UNKNOWN);
  EXPECT_NE(reply.failure().error_msg().find("malformed"), std::string::npos) << reply.failure().error_msg();
}

TEST_F(MeasureWorkerTest, StopsServingWhenTheOtherSideCloses) {
  close(fds_[0]);
  fds_[0] = -1;
  server_.join();
  EXPECT_TRUE(served_);
}

TEST(RefuseRequests, AnswersTheRequestWithTheReason) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  std::thread refuser([fd = fds[1]] { refuse_requests(fd, "no seccomp here"); });
  ASSERT_TRUE(write_frame(fds[0], v1::LeasedBatch()).ok());
  v1::WorkerReport reply;
  ASSERT_TRUE(read_frame(fds[0], reply, monotonic_ms() + 30'000).ok());
  EXPECT_EQ(reply.failure().error(), v1::UNKNOWN);
  EXPECT_NE(reply.failure().error_msg().find("could not be set up: no seccomp here"), std::string::npos)
      << reply.failure().error_msg();
  refuser.join();
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace tunefarm
