// The compiler-backed task and the local sandboxed backend, end to end: real candidates compiled
// by the embedded compiler, measured in the sandbox worker, checked against the reference kernel.
#include "tuner/compiler_task.h"

#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>


namespace tunefarm {
namespace {

std::unique_ptr<CompilerTask> make(const char* workload) {
  auto task = CompilerTask::create(*parse_workload(workload), *parse_target("llvm"));
  EXPECT_TRUE(task.ok()) << task.status().to_string();
  return task.ok() ? std::move(*task) : nullptr;
}

TEST(CompilerTask, ConfigsAndPointsRoundTripAndFeaturesHaveOneWidth) {
  auto task = make("matmul:M=64,N=48,K=40");
  ASSERT_TRUE(task);
  const SearchSpace& space = task->space();
  EXPECT_GT(space.size(), 100);
  Rng rng(5);
  FeatureMatrix features;
  std::vector<Point> points;
  for (int i = 0; i < 50; ++i) {
    auto p = space.sample(rng);
    ASSERT_TRUE(p.has_value());
    Config c = task->config_at(*p);
    EXPECT_EQ(c.template_name, task->template_name());
    auto back = task->point_of(c);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, *p);
    points.push_back(*p);
  }
  ASSERT_TRUE(task->features(points, features).ok());
  EXPECT_EQ(features.rows(), 50);
  EXPECT_GT(features.cols, 3);
  // Distinct configs look distinct to the model.
  std::set<std::vector<float>> rows;
  for (int64_t i = 0; i < features.rows(); ++i) rows.emplace(features.row(i).begin(), features.row(i).end());
  EXPECT_GT(rows.size(), 40u);

  Config foreign{"conv2d_nchw.cpu.nchwc", {}};
  EXPECT_EQ(task->point_of(foreign).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CompilerTask::create(*parse_workload("matmul:M=4,N=4,K=4"), *parse_target("llvm"), "no.such.template")
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tunefarm
