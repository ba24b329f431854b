#include "tuner/tuning_loop.h"

#include <cmath>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tunefarm {
namespace {

// A task over a synthetic landscape: the "artifact" carries the point's index, and the fake
// backend turns it into a time. Knob a == 7 cannot be built; knob b == 7 crashes at run time.
class FakeTask : public TuningTask {
 public:
  FakeTask(std::vector<int64_t> radices, std::function<double(const Point&)> gflops)
      : space_(names(radices.size()), radices), gflops_(std::move(gflops)) {
    workload_.set_op("matmul");
  }
  static std::vector<std::string> names(size_t n) {
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) out.push_back(fmt::format("k{}", i));
    return out;
  }
  const v1::Workload& workload() const override { return workload_; }
  double flops() const override { return 1e9; }
  const SearchSpace& space() const override { return space_; }
  Config config_at(const Point& p) const override {
    Config c{"fake", {}};
    for (size_t i = 0; i < p.size(); ++i) c.knobs.emplace_back(space_.names()[i], int64_t{p[i]});
    return c;
  }
  StatusOr<Point> point_of(const Config& c) const override {
    Point p;
    for (const auto& [name, v] : c.knobs) p.push_back(static_cast<int32_t>(std::get<int64_t>(v)));
    TF_RETURN_IF_ERROR(space_.check_range(p));
    return p;
  }
  Status features(std::span<const Point> points, FeatureMatrix& out) const override {
    for (const Point& p : points) TF_RETURN_IF_ERROR(out.add_row(std::vector<float>(p.begin(), p.end())));
    return Status();
  }
  StatusOr<v1::Artifact> build(const Point& p) const override {
    if (p.size() > 0 && p[0] == 7) return invalid_argument("tile does not fit");
    v1::Artifact a;
    a.set_entry_symbol(std::to_string(space_.index_of(p)));
    return a;
  }
  StatusOr<v1::Artifact> build_reference() const override {
    v1::Artifact a;
    a.set_entry_symbol("reference");
    return a;
  }
  double true_gflops(int64_t index) const { return gflops_(space_.point_at(index)); }

 private:
  v1::Workload workload_;
  SearchSpace space_;
  std::function<double(const Point&)> gflops_;
};

class FakeBackend : public MeasureBackend {
 public:
  FakeBackend(const FakeTask& task, bool shares_cpu) : task_(task), shares_cpu_(shares_cpu) {}
  Status measure(const v1::Workload&, const v1::MeasureOptions&, const v1::Artifact* reference,
                 std::span<const v1::Artifact> candidates, const ResultFn& on_result) override {
    std::lock_guard<std::mutex> lock(mu_);
    saw_reference_ |= reference != nullptr;
    for (size_t i = 0; i < candidates.size(); ++i) {
      int64_t index = std::stoll(candidates[i].entry_symbol());
      measured_[index]++;
      v1::MeasureResult r;
      Point p = task_.space().point_at(index);
      double g = task_.true_gflops(index) * (lucky_.count(index) && measured_[index] == 1 ? 10.0 : 1.0);
      if (p.size() > 1 && p[1] == 7) {
        r.set_error(v1::RUNTIME_ERROR);
        r.set_error_msg("segfault");
      } else {
        r.add_costs(1.0 / g);
      }
      on_result(i, r);
    }
    return Status();
  }
  bool shares_host_cpu() const override { return shares_cpu_; }

  std::mutex mu_;
  std::map<int64_t, int> measured_;
  std::set<int64_t> lucky_;  // Measured 10x too fast the first time only.
  bool saw_reference_ = false;

 private:
  const FakeTask& task_;
  bool shares_cpu_;
};

double peak(const Point& p) {
  return 1.0 + 100.0 * std::exp(-(std::pow(p[0] - 5, 2) + std::pow(p[1] - 2, 2) + std::pow(p[2] - 3, 2)) / 4.0);
}

struct Collected {
  std::mutex mu;
  std::vector<TrialResult> results;
  std::vector<TuningProgress> progress;
};

StatusOr<TuningOutcome> run_loop(TuningLoop& loop, Collected& c) {
  return loop.run(
      [&](const TrialResult& r) {
        std::lock_guard<std::mutex> lock(c.mu);
        c.results.push_back(r);
      },
      [&](const TuningProgress& p) { c.progress.push_back(p); });
}

TEST(TuningLoop, MeasuresExactlyTheBudgetOfDistinctConfigsInBothPipelineModes) {
  for (bool shares_cpu : {true, false}) {
    FakeTask task({8, 8, 8}, peak);
    FakeBackend backend(task, shares_cpu);
    TuningOptions options;
    options.trials = 100;
    options.batch_size = 16;
    options.measure.set_check_correctness(true);
    TuningLoop loop({&task}, {}, backend, options);
    Collected c;
    auto outcome = run_loop(loop, c);
    ASSERT_TRUE(outcome.ok()) << outcome.status().to_string();
    EXPECT_EQ(outcome->stop_reason, "trial budget");
    EXPECT_EQ(outcome->trials, 100);
    ASSERT_EQ(c.results.size(), 100u);
    std::set<int64_t> distinct;
    int invalid = 0, crashed = 0;
    for (const auto& r : c.results) {
      distinct.insert(task.space().index_of(r.point));
      invalid += r.result.error() == v1::INVALID_CONFIG;
      crashed += r.result.error() == v1::RUNTIME_ERROR;
      if (r.result.error() == v1::OK) {
        EXPECT_GT(r.gflops, 0);
      }
    }
    EXPECT_EQ(distinct.size(), 100u);
    EXPECT_TRUE(backend.saw_reference_);
    ASSERT_TRUE(outcome->tasks[0].has_best);
    EXPECT_GT(outcome->tasks[0].best_gflops, 50.0);  // The search climbed the peak.
    ASSERT_FALSE(c.progress.empty());
    EXPECT_EQ(c.progress.back().trials_done, 100);
    EXPECT_EQ(c.progress.back().errors_by_code[v1::INVALID_CONFIG], invalid);
    EXPECT_EQ(c.progress.back().errors_by_code[v1::RUNTIME_ERROR], crashed);
  }
}

TEST(TuningLoop, PreloadedResultsCountAndAreNeverMeasuredAgain) {
  FakeTask task({8, 8, 8}, peak);
  FakeBackend backend(task, true);
  TuningOptions options;
  options.trials = 64;
  options.batch_size = 16;
  TuningLoop loop({&task}, {}, backend, options);
  std::vector<TrialResult> earlier;
  std::set<int64_t> earlier_idx;
  for (int64_t i = 0; i < 30; ++i) {
    TrialResult r;
    r.point = task.space().point_at(i * 7);
    r.gflops = peak(r.point);
    earlier.push_back(r);
    earlier_idx.insert(i * 7);
  }
  earlier.push_back(earlier.front());  // Recorded twice: still one trial.
  ASSERT_TRUE(loop.preload(0, earlier).ok());
  Collected c;
  auto outcome = run_loop(loop, c);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(c.results.size(), 34u);
  EXPECT_EQ(outcome->trials, 64);
  for (const auto& r : c.results) EXPECT_FALSE(earlier_idx.count(task.space().index_of(r.point)));
}

TEST(TuningLoop, StopsWhenTheSpaceIsExhaustedOrNothingImproves) {
  FakeTask small({4, 3, 1}, peak);
  FakeBackend backend(small, true);
  TuningOptions options;
  options.trials = 100;
  options.batch_size = 5;
  TuningLoop loop({&small}, {}, backend, options);
  Collected c;
  auto outcome = run_loop(loop, c);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->stop_reason, "space exhausted");
  EXPECT_EQ(c.results.size(), 12u);

  FakeTask flat({8, 8, 8}, [](const Point&) { return 10.0; });
  FakeBackend flat_backend(flat, true);
  options.early_stopping = 20;
  options.strategy = Strategy::kRandom;
  TuningLoop stopping({&flat}, {}, flat_backend, options);
  Collected c2;
  auto stopped = run_loop(stopping, c2);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->stop_reason, "early stopping");
  EXPECT_LT(c2.results.size(), 40u);
}

TEST(TuningLoop, TasksShareTheBudget) {
  FakeTask a({8, 8, 8}, peak), b({8, 8, 8}, [](const Point& p) { return 0.5 * peak(p); });
  FakeBackend backend(a, true);  // Both tasks have the same space, so one backend serves both.
  TuningOptions options;
  options.trials = 96;
  options.batch_size = 16;
  TuningLoop loop({&a, &b}, {1.0, 2.0}, backend, options);
  Collected c;
  auto outcome = run_loop(loop, c);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->trials, 96);
  EXPECT_EQ(outcome->tasks[0].trials + outcome->tasks[1].trials, 96);
  EXPECT_GE(outcome->tasks[0].trials, 16);
  EXPECT_GE(outcome->tasks[1].trials, 16);
}

TEST(TuningLoop, ReMeasurementCorrectsALuckyFirstTiming) {
  FakeTask task({8, 8, 8}, peak);
  FakeBackend backend(task, true);
  // A poor config (1.4 GFLOP/s) whose first timing says 14, ahead of the best the grid reaches
  // in 48 trials ({5,2,0}: 11.5).
  Point lucky{2, 4, 0};
  int64_t lucky_index = task.space().index_of(lucky);
  ASSERT_LT(lucky_index, 48);
  backend.lucky_.insert(lucky_index);
  TuningOptions options;
  options.trials = 48;
  options.batch_size = 16;
  options.strategy = Strategy::kGrid;  // Index order: measures `lucky` and {5,2,0}.
  TuningLoop loop({&task}, {}, backend, options);
  Collected c;
  auto outcome = run_loop(loop, c);
  ASSERT_TRUE(outcome.ok());
  EXPECT_GE(backend.measured_[lucky_index], 2) << "the lucky config was not re-measured";
  const TaskOutcome& t = outcome->tasks[0];
  ASSERT_TRUE(t.has_best);
  auto p = task.point_of(t.best_config);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (Point{5, 2, 0}));
  EXPECT_NEAR(t.best_gflops, peak(*p), 1e-6 * peak(*p));
  EXPECT_EQ(t.best_costs.size(), 3u);  // One cost per interleaved round.
}

TEST(TuningLoop, CancelStopsAfterTheBatchInFlight) {
  FakeTask task({8, 8, 8}, peak);
  FakeBackend backend(task, true);
  TuningOptions options;
  options.trials = 400;
  options.batch_size = 16;
  TuningLoop loop({&task}, {}, backend, options);
  std::vector<TrialResult> seen;
  auto outcome = loop.run([&](const TrialResult& r) {
    seen.push_back(r);
    if (seen.size() == 20) loop.cancel();
  }, nullptr);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->stop_reason, "cancelled");
  EXPECT_EQ(seen.size(), 32u);
}

TEST(TuningLoop, RejectsBadBudgets) {
  FakeTask task({8}, [](const Point&) { return 1.0; });
  FakeBackend backend(task, true);
  TuningOptions options;
  options.trials = 0;
  TuningLoop loop({&task}, {}, backend, options);
  EXPECT_THAT(loop.run(nullptr, nullptr).status().message(), ::testing::HasSubstr("trial budget 0"));
  EXPECT_EQ(loop.preload(3, {}).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tunefarm
