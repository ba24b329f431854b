// The compiler-backed task and the local sandboxed backend, end to end: real candidates compiled
// by the embedded compiler, measured in the sandbox worker, checked against the reference kernel.
#include "tuner/compiler_task.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/wire/wire.h"
#include "tests/disassembly.h"
#include "tuner/local_backend.h"


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

TEST(CompilerTask, TunesASmallMatmulLocallyEndToEnd) {
  auto task = make("matmul:M=64,N=64,K=64");
  ASSERT_TRUE(task);
  auto backend = LocalMeasureBackend::create();
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  TuningOptions options;
  options.trials = 24;
  options.batch_size = 8;
  options.build_threads = 2;
  options.measure.set_repeat(2);
  options.measure.set_min_repeat_ms(1);
  options.measure.set_timeout_s(10);
  options.measure.set_check_correctness(true);
  options.remeasure_rounds = 2;
  TuningLoop loop({task.get()}, {}, **backend, options);
  std::vector<TrialResult> results;
  int remeasured = 0;
  auto outcome = loop.run(
      [&](const TrialResult& r) {
        if (r.remeasure_round > 0) {
          ++remeasured;
          EXPECT_EQ(r.result.error(), v1::OK) << r.result.error_msg();
        } else {
          results.push_back(r);
        }
      },
      nullptr);
  ASSERT_TRUE(outcome.ok()) << outcome.status().to_string();
  ASSERT_EQ(results.size(), 24u);
  // A third of the trials: the best 3 and the template's default, twice.
  EXPECT_EQ(remeasured, TuningLoop::remeasure_budget(options, 24, 1));
  EXPECT_EQ(remeasured, 8);
  int ok = 0;
  for (const auto& r : results) {
    ok += r.result.error() == v1::OK;
    EXPECT_TRUE(r.result.error() == v1::OK) << v1::ErrorCode_Name(r.result.error()) << ": " << r.result.error_msg();
  }
  EXPECT_EQ(ok, 24);
  ASSERT_TRUE(outcome->tasks[0].has_best);
  EXPECT_GT(outcome->tasks[0].best_gflops, 0.5);
  EXPECT_TRUE(task->point_of(outcome->tasks[0].best_config).ok());
}

}  // namespace
}  // namespace tunefarm

namespace tunefarm {
namespace {

// Recorded data: 300 random configs of matmul 256³ measured on this kind of machine by
// `search_bench --strategies random --records-out` (see bench/RESULTS.md). The cost model trained
// on half of them must rank the other half far better than chance, with either kind of features.
class CostModelOnRecordedData : public ::testing::TestWithParam<FeatureKind> {};

TEST_P(CostModelOnRecordedData, RanksHeldOutMeasurementsBetterThanChance) {
  std::ifstream in(std::string(TUNEFARM_TEST_DATA_DIR) + "/matmul256_records.jsonl");
  ASSERT_TRUE(in) << "recorded data missing";
  auto task = CompilerTask::create(*parse_workload("matmul:M=256,N=256,K=256"), *parse_target("llvm"), "", GetParam());
  ASSERT_TRUE(task.ok()) << task.status().to_string();
  std::vector<HistoryRecord> records;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    auto c = parse_config_json(j["config"].dump());
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    records.push_back({j["workload"].get<std::string>(), *c, j["gflops"].get<double>()});
  }
  ASSERT_GE(records.size(), 200u);
  double best = 0;
  for (const HistoryRecord& r : records) best = std::max(best, r.gflops);
  FeatureMatrix train_x, test_x;
  std::vector<float> train_y, test_y;
  for (size_t i = 0; i < records.size(); ++i) {
    auto row = (*task)->history_features(records[i]);
    ASSERT_TRUE(row.ok()) << row.status().to_string();
    ASSERT_TRUE((i % 2 ? test_x : train_x).add_row(*row).ok());
    (i % 2 ? test_y : train_y).push_back(static_cast<float>(records[i].gflops / best));
  }
  CostModel model;
  ASSERT_TRUE(model.fit(train_x, train_y).ok());
  auto scores = model.predict(test_x);
  ASSERT_TRUE(scores.ok());
  int64_t agree = 0, total = 0;
  for (size_t i = 0; i < test_y.size(); ++i)
    for (size_t j = 0; j < test_y.size(); ++j)
      if (test_y[i] > test_y[j] * 1.05f) {  // Pairs that differ by more than the noise.
        ++total;
        agree += (*scores)[i] > (*scores)[j];
      }
  double accuracy = static_cast<double>(agree) / total;
  RecordProperty("pairwise_accuracy", std::to_string(accuracy));
  std::printf("%s features: pairwise accuracy %.3f on %lld held-out pairs\n",
              std::string(feature_kind_name(GetParam())).c_str(), accuracy, static_cast<long long>(total));
  EXPECT_GT(accuracy, 0.7);
}

INSTANTIATE_TEST_SUITE_P(Features, CostModelOnRecordedData, ::testing::Values(FeatureKind::kLoop, FeatureKind::kKnob),
                         [](const auto& info) { return std::string(feature_kind_name(info.param)); });

TEST(CompilerTask, HistoryOfAnotherShapeDescribesItsOwnLoops) {
  auto created = CompilerTask::create(*parse_workload("matmul:M=512,N=512,K=512"), *parse_target("llvm"), "",
                                      FeatureKind::kLoop);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  auto& task = *created;
  Config c = task->config_at(*task->default_point());
  auto here = task->history_features({"matmul:M=512,N=512,K=512", c, 1.0});
  auto other = task->history_features({"matmul:M=1024,N=1024,K=64", c, 1.0});
  ASSERT_TRUE(here.ok()) << here.status().to_string();
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  EXPECT_EQ(here->size(), other->size());
  // Loop features describe the loops of the record's own workload, not of this task's.
  EXPECT_NE(*here, *other);
  FeatureMatrix x;
  ASSERT_TRUE(task->features(std::vector<Point>{*task->default_point()}, x).ok());
  EXPECT_EQ(std::vector<float>(x.row(0).begin(), x.row(0).end()), *here);

  EXPECT_FALSE(task->history_features({"matmul:M=0,N=1", c, 1.0}).ok());
  Config foreign{"conv2d_nchw.cpu.nchwc", {}};
  EXPECT_EQ(task->history_features({"matmul:M=512,N=512,K=512", foreign, 1.0}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(parse_feature_kind("itervar").status().code(), StatusCode::kInvalidArgument);
}

// What tunerd builds for a key of AVX2-only boards (llvm resolved to -mcpu=haswell): no AVX-512
// instruction, whatever this host has. The same config for an AVX-512 CPU shows that the check
// can fail.
TEST(CompilerTask, CandidatesForAHaswellBoardHaveNoAvx512Instructions) {
  const char* workload = "matmul:M=64,N=64,K=64";
  for (const char* text : {"llvm -mcpu=haswell", "llvm -mcpu=x86-64-v4"}) {
    auto task = CompilerTask::create(*parse_workload(workload), *parse_target(text));
    ASSERT_TRUE(task.ok()) << task.status().to_string();
    auto point = (*task)->default_point();
    ASSERT_TRUE(point.has_value());
    auto artifact = (*task)->build(*point);
    ASSERT_TRUE(artifact.ok()) << artifact.status().to_string();
    EXPECT_EQ(from_proto(artifact->target())->to_string(), text);
    std::string code = testing::disassemble(artifact->data());
    ASSERT_THAT(code, ::testing::HasSubstr("vfmadd")) << text << ": not vectorized with FMA; the check says nothing";
    if (std::string_view(text) == "llvm -mcpu=haswell") {
      EXPECT_EQ(code.find("zmm"), std::string::npos) << "AVX-512 registers in code for haswell";
      EXPECT_THAT(code, ::testing::HasSubstr("ymm"));
    } else {
      EXPECT_THAT(code, ::testing::HasSubstr("zmm"));
    }
  }
}

}  // namespace
}  // namespace tunefarm
