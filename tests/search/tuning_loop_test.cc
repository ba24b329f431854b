#include "search/tuning_loop.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/figure.h"
#include "tests/search/fakes.h"

namespace tunefarm {
namespace {

double peak(const Point& p) {
  return 1.0 + 100.0 * std::exp(-(std::pow(p[0] - 5, 2) + std::pow(p[1] - 2, 2) + std::pow(p[2] - 3, 2)) / 4.0);
}

struct Collected {
  std::mutex mu;
  std::vector<TrialResult> results;     // Trials.
  std::vector<TrialResult> remeasured;  // The final re-measurement's results.
  std::vector<TuningProgress> progress;
};

StatusOr<TuningOutcome> run_loop(TuningLoop& loop, Collected& c) {
  return loop.run(
      [&](const TrialResult& r) {
        std::lock_guard<std::mutex> lock(c.mu);
        (r.remeasure_round > 0 ? c.remeasured : c.results).push_back(r);
      },
      [&](const TuningProgress& p) { c.progress.push_back(p); });
}

// On a remote farm the loop overlaps measuring one batch with building the next, but a searcher
// that learns must propose from every result of its own previous batch.
TEST(TuningLoop, ALearningSearcherProposesOnlyAfterItsLastBatchIsMeasured) {
  for (Strategy strategy : {Strategy::kXgbSa, Strategy::kGenetic}) {
    FakeTask task({7, 8, 8}, peak);  // Every point builds (p[0] == 7 would not), so every one is measured.
    FakeBackend backend(task, /*shares_cpu=*/false);
    std::atomic<int64_t> delivered{0};
    backend.after_result = [&](int64_t n) {
      delivered.store(n);
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    };
    std::mutex mu;
    std::vector<int64_t> seen_at_build;
    task.on_build = [&] {
      std::lock_guard<std::mutex> lock(mu);
      seen_at_build.push_back(delivered.load());
    };
    TuningOptions options;
    options.strategy = strategy;
    options.trials = 64;
    options.batch_size = 16;
    options.remeasure_rounds = 0;
    TuningLoop loop({&task}, {}, backend, options);
    Collected c;
    auto outcome = run_loop(loop, c);
    ASSERT_TRUE(outcome.ok()) << outcome.status().to_string();
    ASSERT_EQ(seen_at_build.size(), 64u);
    for (size_t i = 0; i < seen_at_build.size(); ++i)
      EXPECT_EQ(seen_at_build[i], static_cast<int64_t>(i / 16 * 16)) << strategy_name(strategy) << " build " << i;
  }
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
    EXPECT_EQ(outcome->stop_reason, StopReason::kTrialBudget);
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
    // The search found the peak itself (101; its neighbours give 79): random search over 100 of
    // these 512 points does so one time in five.
    EXPECT_DOUBLE_EQ(outcome->tasks[0].best_gflops, 101.0);
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
  EXPECT_EQ(outcome->stop_reason, StopReason::kSpaceExhausted);
  EXPECT_EQ(c.results.size(), 12u);

  FakeTask flat({8, 8, 8}, [](const Point&) { return 10.0; });
  FakeBackend flat_backend(flat, true);
  options.early_stopping = 20;
  options.strategy = Strategy::kRandom;
  TuningLoop stopping({&flat}, {}, flat_backend, options);
  Collected c2;
  auto stopped = run_loop(stopping, c2);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->stop_reason, StopReason::kEarlyStopping);
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

TEST(TuningLoop, ABudgetTooSmallForFullBatchesStillReachesEveryTask) {
  std::vector<std::unique_ptr<FakeTask>> owned;
  std::vector<const FakeTask*> tasks;
  for (int i = 0; i < 5; ++i) {
    owned.push_back(std::make_unique<FakeTask>(std::vector<int64_t>{8, 8, 8}, peak));
    tasks.push_back(owned.back().get());
  }
  FakeBackend backend(*owned[0], true);  // One space for all, so one backend serves every task.
  TuningOptions options;
  options.trials = 22;
  options.batch_size = 8;  // Full batches would reach two tasks and a part of a third.
  TuningLoop loop({tasks.begin(), tasks.end()}, {}, backend, options);
  Collected c;
  auto outcome = run_loop(loop, c);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->trials, 22);
  for (const auto& t : outcome->tasks) EXPECT_GE(t.trials, 2) << "its default and one candidate at least";
}

// Measures each task's candidates on that task's own landscape (FakeBackend serves one task).
class PerTaskBackend : public MeasureBackend {
 public:
  explicit PerTaskBackend(std::vector<const FakeTask*> tasks) : tasks_(std::move(tasks)) {}
  Status measure(const v1::Workload& workload, const v1::MeasureOptions&, const v1::Artifact*,
                 std::span<const v1::Artifact> candidates, const ResultFn& on_result) override {
    const FakeTask* task = nullptr;
    for (const FakeTask* t : tasks_)
      if (t->workload().SerializeAsString() == workload.SerializeAsString()) task = t;
    if (!task) return internal_error("no such task");
    for (size_t i = 0; i < candidates.size(); ++i) {
      v1::MeasureResult r;
      r.add_costs(1.0 / task->true_gflops(std::stoll(candidates[i].entry_symbol())));
      on_result(i, r);
    }
    return Status();
  }
  bool shares_host_cpu() const override { return true; }

 private:
  std::vector<const FakeTask*> tasks_;
};

// A model's job weights each task by how often it occurs: the scheduler spends the budget where
// count x latency falls most, and nothing more on a task that cannot improve (its space is spent).
TEST(TuningLoop, TheSchedulerSpendsTrialsWhereCountTimesLatencyFallsMost) {
  FakeTask common({8, 8, 8}, peak, "matmul:M=64,N=64,K=64");
  FakeTask rare({8, 8, 8}, peak, "matmul:M=32,N=32,K=32");
  FakeTask done({2, 2, 1}, [](const Point&) { return 50.0; }, "matmul:M=16,N=16,K=16");
  PerTaskBackend backend({&common, &rare, &done});
  TuningOptions options;
  options.trials = 160;
  options.batch_size = 16;
  options.remeasure_rounds = 0;
  TuningLoop loop({&common, &rare, &done}, {20.0, 1.0, 1.0}, backend, options);
  Collected c;
  auto outcome = run_loop(loop, c);
  ASSERT_TRUE(outcome.ok()) << outcome.status().to_string();
  EXPECT_EQ(outcome->trials, 160);
  EXPECT_GT(outcome->tasks[0].trials, 100) << "the task that occurs 20 times";
  EXPECT_GE(outcome->tasks[1].trials, 16);
  EXPECT_EQ(outcome->tasks[2].trials, 4) << "its 4 configs, nothing more";
}

// A model's job whose budget is short for its many tasks: each task's first round only says how
// slow it is, and the budget goes where the model's time is. In first rounds of an equal share
// (8 each here), the eleven rare tasks would have taken 88 of the 96 trials.
TEST(TuningLoop, FirstRoundsOfManyTasksLeaveTheBudgetToWhereTheTimeIs) {
  std::vector<std::unique_ptr<FakeTask>> owned;
  std::vector<const FakeTask*> tasks;
  std::vector<double> weights;
  for (int i = 0; i < 12; ++i) {
    // Landscapes within 1.4x, as a tuned kernel's are of its default: the count decides.
    owned.push_back(std::make_unique<FakeTask>(std::vector<int64_t>{8, 8, 8},
                                               [](const Point& p) { return 50.0 + p[0] + p[1] + p[2]; },
                                               fmt::format("matmul:M=64,N=64,K={}", 64 + i)));
    tasks.push_back(owned.back().get());
    weights.push_back(i == 0 ? 40.0 : 1.0);
  }
  PerTaskBackend backend(tasks);
  TuningOptions options;
  options.trials = 96;
  options.batch_size = 8;
  options.remeasure_rounds = 0;
  TuningLoop loop({tasks.begin(), tasks.end()}, weights, backend, options);
  Collected c;
  auto outcome = run_loop(loop, c);
  ASSERT_TRUE(outcome.ok()) << outcome.status().to_string();
  EXPECT_EQ(outcome->trials, 96);
  EXPECT_GE(outcome->tasks[0].trials, 48) << "the task that occurs 40 times";
  for (size_t i = 1; i < tasks.size(); ++i) EXPECT_GE(outcome->tasks[i].trials, 2) << "task " << i;
}

// The re-measurement budget follows count x latency, no task above its cap, what a capped task
// leaves going to the others; a task without candidates to compare gets nothing.
TEST(RemeasureShares, FollowCountTimesLatencyUnderTheCap) {
  EXPECT_THAT(remeasure_shares(30, {1, 1, 1}, 15), ::testing::ElementsAre(10, 10, 10));
  EXPECT_THAT(remeasure_shares(30, {8, 1, 1, 0}, 15), ::testing::ElementsAre(15, 7, 7, 0));
  EXPECT_THAT(remeasure_shares(100, {1, 1}, 15), ::testing::ElementsAre(15, 15));
  EXPECT_THAT(remeasure_shares(0, {1, 1}, 15), ::testing::ElementsAre(0, 0));
  EXPECT_THAT(remeasure_shares(10, {0, 0}, 15), ::testing::ElementsAre(0, 0));
  // A task alone gets the whole budget whatever its latency: 15 x (w / w) in that order of
  // operations can be 14.999...
  for (double w : {4.2e-5, 1.0 / 3, 7.77e-4, 0.1, 2.9e-6}) EXPECT_THAT(remeasure_shares(15, {w}, 15), ::testing::ElementsAre(15)) << w;
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
  EXPECT_EQ(t.best_costs.size(), 1u);  // The costs of the measurement that is its figure.
  // Every re-measurement is reported for the history: 5 candidates, 3 interleaved rounds.
  ASSERT_EQ(c.remeasured.size(), 15u);
  for (size_t i = 0; i < c.remeasured.size(); ++i) EXPECT_EQ(c.remeasured[i].remeasure_round, 1 + int(i / 5));
}

// The winner is the config with the best figure over all its measurements (common/figure.h), the
// rule the history's best query uses: grouping what the loop reported by config and applying the
// rule gives the loop's own winner and figure.
TEST(TuningLoop, TheWinnerIsTheBestFigureOfWhatWasReported) {
  FakeTask task({8, 8, 8}, peak);
  FakeBackend backend(task, true);
  for (int64_t i = 0; i < 64; i += 3) backend.lucky_.insert(i);  // Many first timings 10x too fast.
  TuningOptions options;
  options.trials = 64;
  options.batch_size = 16;
  options.strategy = Strategy::kGrid;
  TuningLoop loop({&task}, {}, backend, options);
  Collected c;
  auto outcome = run_loop(loop, c);
  ASSERT_TRUE(outcome.ok());
  std::map<int64_t, std::vector<double>> costs;
  for (const auto* list : {&c.results, &c.remeasured})
    for (const TrialResult& r : *list)
      if (r.gflops > 0) costs[task.space().index_of(r.point)].push_back(task.flops() / r.gflops / 1e9);
  int64_t best = -1;
  double best_cost = 0;
  for (const auto& [index, list] : costs) {
    double cost = figure_cost(list);
    if (best < 0 || cost < best_cost) {
      best = index;
      best_cost = cost;
    }
  }
  const TaskOutcome& t = outcome->tasks[0];
  ASSERT_TRUE(t.has_best);
  // Ties aside, the same config: its figure is the best one.
  EXPECT_DOUBLE_EQ(figure_cost(costs[task.space().index_of(*task.point_of(t.best_config))]), best_cost);
  EXPECT_NEAR(t.best_gflops, task.flops() / best_cost / 1e9, 1e-9 * t.best_gflops);
  // The job's best after the re-measurement is the winner's figure, not a lucky trial's.
  EXPECT_NEAR(c.progress.back().best_gflops, t.best_gflops, 1e-9 * t.best_gflops);
}

// A cancel withdraws what the batch in flight has not measured yet: nothing after it is measured.
TEST(TuningLoop, CancelWithdrawsTheRestOfTheBatchInFlight) {
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
  EXPECT_EQ(outcome->stop_reason, StopReason::kCancelled);
  EXPECT_EQ(seen.size(), 20u);
  EXPECT_EQ(outcome->trials, 20) << "what was measured before the cancel counts";
}

// A time budget that ends inside a batch withdraws the rest of it: the run ends within the budget
// plus one measurement, not one batch, and counts exactly what was measured.
TEST(TuningLoop, ATimeBudgetEndsInsideABatch) {
  for (bool shares_cpu : {true, false}) {
    FakeTask task({8, 8, 8}, peak);
    FakeBackend backend(task, shares_cpu);
    backend.delay = std::chrono::milliseconds(50);  // A batch of 64 takes 3.2 s.
    TuningOptions options;
    options.trials = 400;
    options.batch_size = 64;
    options.time_budget_s = 0.5;
    TuningLoop loop({&task}, {}, backend, options);
    Collected c;
    auto start = std::chrono::steady_clock::now();
    auto outcome = run_loop(loop, c);
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(outcome.ok()) << outcome.status().to_string();
    EXPECT_EQ(outcome->stop_reason, StopReason::kTimeBudget);
    EXPECT_LT(took, 1.5) << "shares_cpu " << shares_cpu;
    EXPECT_GT(c.results.size(), 0u);
    EXPECT_LT(c.results.size(), 64u);
    EXPECT_EQ(outcome->trials, static_cast<int>(c.results.size()));
    EXPECT_TRUE(c.remeasured.empty());
    ASSERT_FALSE(c.progress.empty());
    EXPECT_EQ(c.progress.back().trials_done, outcome->trials);
  }
}

// A spent time budget ends the job with its best trial: no re-measurement rounds after it.
TEST(TuningLoop, ASpentTimeBudgetSkipsTheReMeasurement) {
  FakeTask task({8, 8, 8}, peak);
  FakeBackend backend(task, true);
  backend.delay = std::chrono::milliseconds(5);
  TuningOptions options;
  options.trials = 400;
  options.batch_size = 16;
  options.time_budget_s = 0.05;
  TuningLoop loop({&task}, {}, backend, options);
  Collected c;
  auto outcome = run_loop(loop, c);
  ASSERT_TRUE(outcome.ok()) << outcome.status().to_string();
  EXPECT_EQ(outcome->stop_reason, StopReason::kTimeBudget);
  // Trials that failed to build never reach the backend; re-measurement would add 15 more.
  EXPECT_LE(backend.results_, static_cast<int64_t>(c.results.size())) << "measurements beyond the trials";
}

TEST(TuningLoop, TimeSpentInEarlierRunsCountsAgainstTheTimeBudget) {
  FakeTask task({8, 8, 8}, peak);
  FakeBackend backend(task, true);
  TuningOptions options;
  options.trials = 400;
  options.batch_size = 16;
  options.time_budget_s = 60;
  options.elapsed_before_s = 60;
  TuningLoop loop({&task}, {}, backend, options);
  Collected c;
  auto outcome = run_loop(loop, c);
  ASSERT_TRUE(outcome.ok()) << outcome.status().to_string();
  EXPECT_EQ(outcome->stop_reason, StopReason::kTimeBudget);
  EXPECT_TRUE(c.results.empty());

  options.elapsed_before_s = 30;
  TuningLoop resumed({&task}, {}, backend, options);
  Collected d;
  outcome = run_loop(resumed, d);
  ASSERT_TRUE(outcome.ok()) << outcome.status().to_string();
  EXPECT_EQ(outcome->stop_reason, StopReason::kTrialBudget);
  ASSERT_FALSE(d.progress.empty());
  EXPECT_GE(d.progress.front().elapsed_s, 30.0);  // The clock goes on from the earlier runs.
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

namespace tunefarm {
namespace {

TEST(TuningLoop, WarmStartFromARelatedWorkloadFindsTheOptimumSooner) {
  // The related workload's landscape has its peak one step away from this one's.
  auto related = [](const Point& p) {
    return 1.0 + 100.0 * std::exp(-(std::pow(p[0] - 4, 2) + std::pow(p[1] - 2, 2) + std::pow(p[2] - 3, 2)) / 4.0);
  };
  FakeTask old_task({8, 8, 8}, related, "matmul:M=16,N=16,K=16");
  std::vector<HistoryRecord> history;
  Rng rng(9);
  for (int i = 0; i < 300; ++i) {
    Point p = *old_task.space().sample(rng);
    history.push_back({"matmul:M=16,N=16,K=16", old_task.config_at(p), related(p)});
  }
  auto trials_to_peak = [&](bool warm, uint64_t seed) {
    FakeTask task({8, 8, 8}, peak);
    FakeBackend backend(task, true);
    TuningOptions options;
    options.trials = 400;
    options.batch_size = 8;
    options.search.seed = seed;
    options.remeasure_rounds = 0;
    TuningLoop loop({&task}, {}, backend, options);
    if (warm) {
      EXPECT_TRUE(loop.warm_start(0, history).ok());
    }
    int n = 0, found = 0;
    EXPECT_TRUE(loop.run([&](const TrialResult& r) {
                      ++n;
                      if (!found && r.gflops >= 95.0) found = n;
                      if (found) loop.cancel();
                    }, nullptr).ok());
    return found ? found : 401;
  };
  std::vector<int> cold, warm;
  for (uint64_t seed : {1, 2, 3}) {
    cold.push_back(trials_to_peak(false, seed));
    warm.push_back(trials_to_peak(true, seed));
  }
  std::sort(cold.begin(), cold.end());
  std::sort(warm.begin(), warm.end());
  RecordProperty("cold_median", cold[1]);
  RecordProperty("warm_median", warm[1]);
  EXPECT_LT(warm[1], cold[1]);
}

}  // namespace
}  // namespace tunefarm

namespace tunefarm {
namespace {

TEST(TuningLoop, TheTemplatesDefaultIsMeasuredFirst) {
  for (Strategy strategy : {Strategy::kXgbSa, Strategy::kRandom, Strategy::kGrid, Strategy::kGenetic}) {
    FakeTask task({8, 8, 8}, peak);
    task.default_ = Point{5, 2, 3};  // The peak: nothing may end up worse than it.
    FakeBackend backend(task, true);
    TuningOptions options;
    options.trials = 32;
    options.batch_size = 16;
    options.strategy = strategy;
    TuningLoop loop({&task}, {}, backend, options);
    std::vector<TrialResult> results;
    std::vector<TuningProgress> progress;
    auto outcome = loop.run(
        [&](const TrialResult& r) {
          if (r.remeasure_round == 0) results.push_back(r);
        },
        [&](const TuningProgress& p) { progress.push_back(p); });
    ASSERT_TRUE(outcome.ok());
    ASSERT_EQ(results.size(), 32u);
    // In the first batch (results arrive in batch order; build failures of a batch come first).
    auto first_batch_end = results.begin() + 16;
    EXPECT_NE(std::find_if(results.begin(), first_batch_end, [](const TrialResult& r) { return r.point == Point{5, 2, 3}; }),
              first_batch_end)
        << strategy_name(strategy);
    EXPECT_EQ(*task.point_of(outcome->tasks[0].best_config), (Point{5, 2, 3}));
    // Progress reports the default's figure beside the best, for a model's untuned estimate.
    ASSERT_FALSE(progress.empty());
    ASSERT_EQ(progress.back().tasks.size(), 1u);
    EXPECT_DOUBLE_EQ(progress.back().tasks[0].default_gflops, peak(Point{5, 2, 3}));
    EXPECT_EQ(progress.back().tasks[0].trials, 32);
    std::set<int64_t> distinct;
    for (const auto& r : results) distinct.insert(task.space().index_of(r.point));
    EXPECT_EQ(distinct.size(), 32u) << "the default was proposed twice";
  }
}

}  // namespace
}  // namespace tunefarm
