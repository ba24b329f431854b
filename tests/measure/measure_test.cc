#include "measure/measure.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "measure/cuda_runner.h"
#include "tests/measure/test_kernels.h"

namespace tunefarm {
namespace {

using testing::kernel_artifact;
using testing::quick_options;
using testing::reference_artifact;
using testing::test_workload;

class MeasureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = Measurer::create();
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    measurer_ = std::move(*m);
    reference_ = reference_artifact();
  }
  v1::MeasureResult measure(const std::string& kernel, v1::MeasureOptions options = quick_options()) {
    return measurer_->measure(test_workload(), options, &reference_, kernel_artifact(kernel));
  }
  std::unique_ptr<Measurer> measurer_;
  v1::Artifact reference_;
};

TEST_F(MeasureTest, CorrectKernelIsTimed) {
  v1::MeasureResult r = measure("matmul");
  ASSERT_EQ(r.error(), v1::OK) << r.error_msg();
  ASSERT_EQ(r.costs_size(), 2);
  for (double c : r.costs()) {
    EXPECT_GT(c, 1e-7);
    EXPECT_LT(c, 0.5);
  }
  EXPECT_GE(r.finished_at_us(), r.started_at_us());
  // One worker ran the reference, another the candidate.
  EXPECT_EQ(measurer_->worker_starts(), 2);
}

TEST_F(MeasureTest, WrongAnswerIsCaught) {
  v1::MeasureResult r = measure("matmul_wrong");
  EXPECT_EQ(r.error(), v1::WRONG_ANSWER);
  EXPECT_NE(r.error_msg().find("C[67]"), std::string::npos) << r.error_msg();
  EXPECT_EQ(r.costs_size(), 0);
}

TEST_F(MeasureTest, ReferenceOutputsAreNotLeftInTheScratchDirectory) {
  for (int i = 0; i < 3; ++i) ASSERT_EQ(measure("matmul").error(), v1::OK);
  v1::MeasureOptions other_seed = quick_options();
  other_seed.set_input_seed(43);
  ASSERT_EQ(measure("matmul", other_seed).error(), v1::OK);
  // Reference outputs stay in the measurer, and every worker's scratch directory is gone with it.
  EXPECT_TRUE(std::filesystem::is_empty(measurer_->scratch_dir()));
  // Two seeds, two reference runs; four candidates.
  EXPECT_EQ(measurer_->worker_starts(), 6);
}

TEST_F(MeasureTest, MinRepeatMsMakesEachRepeatLastThatLong) {
  v1::MeasureOptions o = quick_options();
  o.set_number(0);
  o.set_min_repeat_ms(30);
  o.set_repeat(3);
  v1::MeasureResult r = measure("matmul", o);
  ASSERT_EQ(r.error(), v1::OK) << r.error_msg();
  EXPECT_GE(r.finished_at_us() - r.started_at_us(), 90'000);
}

TEST_F(MeasureTest, WithoutCorrectnessCheckNoReferenceIsNeeded) {
  v1::MeasureOptions o = quick_options();
  o.set_check_correctness(false);
  v1::MeasureResult r = measurer_->measure(test_workload(), o, nullptr, kernel_artifact("matmul_wrong"));
  EXPECT_EQ(r.error(), v1::OK) << r.error_msg();
  r = measurer_->measure(test_workload(), quick_options(), nullptr, kernel_artifact("matmul"));
  EXPECT_EQ(r.error(), v1::UNKNOWN);
  EXPECT_NE(r.error_msg().find("reference"), std::string::npos);
}

TEST(CudaRunner, ReportsNoDeviceCleanlyOrNamesTheDevice) {
  auto name = cuda_device_name();
  if (name.ok()) GTEST_SKIP() << "a CUDA device is present: " << *name;
  EXPECT_EQ(name.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(name.status().message().starts_with("no CUDA device")) << name.status().message();

  auto measurer = Measurer::create();
  ASSERT_TRUE(measurer.ok());
  v1::Artifact ptx = kernel_artifact("matmul");
  ptx.set_format(v1::Artifact::PTX);
  ptx.set_data(".version 7.8\n.target sm_90\n.address_size 64\n");
  v1::MeasureOptions o = quick_options();
  o.set_check_correctness(false);
  v1::MeasureResult r = (*measurer)->measure(test_workload(), o, nullptr, ptx);
  EXPECT_EQ(r.error(), v1::LOAD_ERROR);
  EXPECT_NE(r.error_msg().find("no CUDA device"), std::string::npos) << r.error_msg();
}

}  // namespace
}  // namespace tunefarm
