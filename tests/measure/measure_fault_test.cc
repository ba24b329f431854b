// A kernel that crashes, hangs, fails, does not load or lacks its symbol is a result with an
// error code; the Measurer survives it and measures the next candidate.
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include <gtest/gtest.h>

#include "measure/measure.h"
#include "tests/measure/test_kernels.h"

namespace tunefarm {
namespace {

using testing::kernel_artifact;
using testing::quick_options;
using testing::test_workload;

class MeasureFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = Measurer::create();
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    measurer_ = std::move(*m);
    reference_ = testing::reference_artifact();
  }
  v1::MeasureResult measure(const v1::Artifact& artifact, double timeout_s = 5) {
    return measurer_->measure(test_workload(), quick_options(timeout_s), &reference_, artifact);
  }
  void expect_next_one_ok() {
    v1::MeasureResult r = measure(kernel_artifact("matmul"));
    EXPECT_EQ(r.error(), v1::OK) << r.error_msg();
  }
  std::unique_ptr<Measurer> measurer_;
  v1::Artifact reference_;
};

TEST_F(MeasureFaultTest, SegfaultIsRuntimeErrorAndTheNextCandidateHasAWorkerOfItsOwn) {
  v1::MeasureResult r = measure(kernel_artifact("crash"));
  EXPECT_EQ(r.error(), v1::RUNTIME_ERROR);
  EXPECT_NE(r.error_msg().find("signal 11"), std::string::npos) << r.error_msg();
  expect_next_one_ok();
  // The reference's worker, then one per candidate.
  EXPECT_EQ(measurer_->worker_starts(), 3);
}

TEST_F(MeasureFaultTest, HangIsRunTimeoutWithinTheTimeout) {
  auto start = std::chrono::steady_clock::now();
  v1::MeasureResult r = measure(kernel_artifact("hang"), 1.0);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.error(), v1::RUN_TIMEOUT) << r.error_msg();
  // The reference is prepared under its own budget, before the candidate's clock starts.
  EXPECT_LT(took, 1.0 + 2.0);
  EXPECT_GE(took, 0.9);
  expect_next_one_ok();
}

TEST_F(MeasureFaultTest, NonZeroReturnIsRuntimeError) {
  v1::MeasureResult r = measure(kernel_artifact("failing"));
  EXPECT_EQ(r.error(), v1::RUNTIME_ERROR);
  EXPECT_NE(r.error_msg().find("returned 7"), std::string::npos) << r.error_msg();
  expect_next_one_ok();
  EXPECT_EQ(measurer_->worker_starts(), 3);
}

TEST_F(MeasureFaultTest, MissingSymbolIsLoadError) {
  v1::MeasureResult r = measure(kernel_artifact("nosym"));
  EXPECT_EQ(r.error(), v1::LOAD_ERROR);
  EXPECT_NE(r.error_msg().find("'entry'"), std::string::npos) << r.error_msg();
  expect_next_one_ok();
}

TEST_F(MeasureFaultTest, GarbageObjectIsLoadError) {
  v1::Artifact junk = kernel_artifact("matmul");
  junk.set_data("\x7f" "ELF this is not an object");
  v1::MeasureResult r = measure(junk);
  EXPECT_EQ(r.error(), v1::LOAD_ERROR);
  EXPECT_NE(r.error_msg().find("cannot load"), std::string::npos) << r.error_msg();
  junk.set_format(v1::Artifact::FORMAT_UNSPECIFIED);
  EXPECT_EQ(measure(junk).error(), v1::LOAD_ERROR);
  expect_next_one_ok();
}

TEST_F(MeasureFaultTest, CrashingReferenceFailsEveryCandidateWithoutRerunning) {
  reference_ = kernel_artifact("crash");
  v1::MeasureResult first = measure(kernel_artifact("matmul"));
  v1::MeasureResult second = measure(kernel_artifact("matmul"));
  EXPECT_EQ(first.error(), v1::UNKNOWN);
  EXPECT_NE(first.error_msg().find("reference"), std::string::npos) << first.error_msg();
  EXPECT_EQ(second.error(), v1::UNKNOWN);
  EXPECT_EQ(measurer_->worker_starts(), 1);
}

TEST_F(MeasureFaultTest, MissingWorkerBinaryIsAClearError) {
  MeasurerOptions options;
  options.worker_path = "/nonexistent/tunefarm-measure-worker";
  auto m = Measurer::create(options);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("not an executable"), std::string::npos);
}

// The worker gone after the measurer found it (an upgrade, a cleaned build directory): the
// self-test names the worker and how to put it back, not the limits, which are not the cause.
TEST_F(MeasureFaultTest, AWorkerThatWentMissingIsNamedAsTheCause) {
  auto installed = find_measure_worker();
  ASSERT_TRUE(installed.ok()) << installed.status().to_string();
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tunefarm-gone-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::path worker = dir / "tunefarm-measure-worker";
  std::filesystem::copy_file(*installed, worker);
  std::filesystem::copy_file(std::filesystem::path(*installed).parent_path() / "tunefarm-probe-kernel.so",
                             dir / "tunefarm-probe-kernel.so");
  MeasurerOptions options;
  options.worker_path = worker.string();
  auto m = Measurer::create(options);
  ASSERT_TRUE(m.ok()) << m.status().to_string();

  std::filesystem::permissions(worker, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  Status not_executable = (*m)->self_test();
  std::filesystem::remove(worker);
  Status missing = (*m)->self_test();
  std::filesystem::remove_all(dir);

  EXPECT_EQ(not_executable.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(not_executable.message().find(worker.string() + " is not an executable file"), std::string::npos)
      << not_executable.message();
  EXPECT_EQ(missing.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.message().find(worker.string() + " is missing"), std::string::npos) << missing.message();
  EXPECT_NE(missing.message().find("TUNEFARM_BIN_DIR"), std::string::npos) << missing.message();
  for (const Status& s : {not_executable, missing})
    EXPECT_EQ(s.message().find("--memory-limit-mb"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tunefarm
