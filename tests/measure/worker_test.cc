// The measurement worker's logic driven in this process over a socket pair, as the sandboxed
// worker process serves it over fd 3, without spawning that process.
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

  v1::MeasureResult exchange(const v1::LeasedBatch& request) {
    v1::MeasureResult reply;
    EXPECT_TRUE(write_frame(fds_[0], request).ok());
    Status got = read_frame(fds_[0], reply, monotonic_ms() + 30'000);
    EXPECT_TRUE(got.ok()) << got.to_string();
    return reply;
  }

  static v1::LeasedBatch request(const std::string& kernel) {
    v1::LeasedBatch r;
    *r.mutable_workload() = testing::test_workload();
    *r.mutable_options() = testing::quick_options();
    *r.mutable_reference() = testing::reference_artifact();
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

TEST_F(MeasureWorkerTest, TimesACorrectKernelAndCatchesAWrongOne) {
  v1::MeasureResult ok = exchange(request("matmul"));
  EXPECT_EQ(ok.error(), v1::OK) << ok.error_msg();
  EXPECT_EQ(ok.costs_size(), 2);
  for (double c : ok.costs()) EXPECT_GT(c, 0);

  v1::MeasureResult wrong = exchange(request("matmul_wrong"));
  EXPECT_EQ(wrong.error(), v1::WRONG_ANSWER);
  // The test workload sums K = 64 products: the default tolerances scaled by sqrt(64).
  EXPECT_NE(wrong.error_msg().find("rtol 8e-05, atol 8e-05"), std::string::npos) << wrong.error_msg();
}

TEST_F(MeasureWorkerTest, LimitsEachRequestsCpuTimeByItsTimeout) {
  v1::LeasedBatch r = request("matmul");
  r.mutable_options()->set_timeout_s(4);
  exchange(r);
  exchange(r);
  double cores = std::max(1u, std::thread::hardware_concurrency());
  std::lock_guard lock(mu_);
  EXPECT_EQ(cpu_limits_, (std::vector<double>{4 * cores + 1, 4 * cores + 1}));
}

TEST_F(MeasureWorkerTest, ReportsKernelsThatCannotRunWithTheirErrorCode) {
  v1::MeasureResult missing = exchange(request("nosym"));
  EXPECT_EQ(missing.error(), v1::LOAD_ERROR) << missing.error_msg();

  v1::LeasedBatch no_reference = request("matmul");
  no_reference.clear_reference();
  v1::MeasureResult unchecked = exchange(no_reference);
  EXPECT_EQ(unchecked.error(), v1::UNKNOWN);
  EXPECT_NE(unchecked.error_msg().find("no reference kernel"), std::string::npos) << unchecked.error_msg();

  v1::LeasedBatch failing = request("failing");
  EXPECT_EQ(exchange(failing).error(), v1::RUNTIME_ERROR);
}

TEST_F(MeasureWorkerTest, AnswersAMalformedFrameAndKeepsServing) {
  const char garbage[] = {4, 0, 0, 0, '\xff', '\xff', '\xff', '\xff'};
  ASSERT_EQ(write(fds_[0], garbage, sizeof garbage), static_cast<ssize_t>(sizeof garbage));
  v1::MeasureResult reply;
  ASSERT_TRUE(read_frame(fds_[0], reply, monotonic_ms() + 30'000).ok());
  EXPECT_EQ(reply.error(), v1::UNKNOWN);
  EXPECT_NE(reply.error_msg().find("malformed"), std::string::npos) << reply.error_msg();
  EXPECT_EQ(exchange(request("matmul")).error(), v1::OK);
}

TEST_F(MeasureWorkerTest, StopsServingWhenTheOtherSideCloses) {
  close(fds_[0]);
  fds_[0] = -1;
  server_.join();
  EXPECT_TRUE(served_);
}

TEST(RefuseRequests, AnswersEveryRequestWithTheReason) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  std::thread refuser([fd = fds[1]] { refuse_requests(fd, "no seccomp here"); });
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(write_frame(fds[0], v1::LeasedBatch()).ok());
    v1::MeasureResult reply;
    ASSERT_TRUE(read_frame(fds[0], reply, monotonic_ms() + 30'000).ok());
    EXPECT_EQ(reply.error(), v1::UNKNOWN);
    EXPECT_NE(reply.error_msg().find("could not be set up: no seccomp here"), std::string::npos) << reply.error_msg();
  }
  close(fds[0]);
  refuser.join();
  close(fds[1]);
}

}  // namespace
}  // namespace tunefarm
