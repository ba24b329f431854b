#include "search/search.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tunefarm {
namespace {

// A synthetic tuning landscape: 6 knobs of 8 values (262,144 points, about half valid), one
// peak, an interaction between two knobs and a flat knob, like schedules where tile sizes
// matter together and some annotation barely does.
SearchSpace landscape_space() {
  return SearchSpace({"a", "b", "c", "d", "e", "f"}, {8, 8, 8, 8, 8, 8},
                     [](const Point& p) { return p[0] + p[1] + p[2] <= 14; });
}

double landscape_gflops(const Point& p) {
  double peak = std::exp(-(std::pow(p[0] - 5, 2) + std::pow(p[1] - 2, 2) + std::pow(p[2] - 6, 2) * 0.5) / 6.0);
  double bonus = p[3] == p[4] ? 1.0 : 0.6;
  return 100.0 * peak * bonus * (p[5] == 7 ? 0.0 : 1.0);  // Value 7 of knob f "fails".
}

Status knob_features(std::span<const Point> points, FeatureMatrix& out) {
  for (const Point& p : points) {
    std::vector<float> row(p.begin(), p.end());
    TF_RETURN_IF_ERROR(out.add_row(row));
  }
  return Status();
}

// Trials needed before a point within 95% of the landscape's optimum (100) was measured;
// `budget` + 1 when none was.
int trials_to_95(Strategy strategy, uint64_t seed, int budget, int batch) {
  SearchSpace space = landscape_space();
  SearchOptions options;
  options.seed = seed;
  options.model.seed = seed;
  auto searcher = make_searcher(strategy, space, options, knob_features);
  int trials = 0;
  while (trials < budget) {
    auto points = searcher->propose(batch);
    EXPECT_TRUE(points.ok());
    if (!points.ok() || points->empty()) break;
    std::vector<double> g;
    for (const Point& p : *points) {
      g.push_back(landscape_gflops(p));
      ++trials;
      if (g.back() >= 95.0) return trials;
    }
    EXPECT_TRUE(searcher->observe(*points, g).ok());
  }
  return budget + 1;
}

TEST(Search, EveryStrategyProposesFreshValidPointsUntilTheSpaceIsExhausted) {
  SearchSpace space({"x", "y"}, {6, 7}, [](const Point& p) { return (p[0] + p[1]) % 3 != 0; });
  int valid = 0;
  for (int64_t i = 0; i < space.size(); ++i) valid += space.is_valid(space.point_at(i));
  for (Strategy s : {Strategy::kXgbSa, Strategy::kRandom, Strategy::kGrid, Strategy::kGenetic}) {
    SCOPED_TRACE(std::string(strategy_name(s)));
    auto searcher = make_searcher(s, space, SearchOptions{}, knob_features);
    std::set<int64_t> seen;
    for (int round = 0; round < 20; ++round) {
      auto batch = searcher->propose(8);
      ASSERT_TRUE(batch.ok()) << batch.status().to_string();
      if (batch->empty()) break;
      std::vector<double> g;
      for (const Point& p : *batch) {
        EXPECT_TRUE(space.is_valid(p));
        EXPECT_TRUE(seen.insert(space.index_of(p)).second) << "proposed twice";
        g.push_back(1.0 + p[0] * p[1]);
      }
      ASSERT_TRUE(searcher->observe(*batch, g).ok());
    }
    EXPECT_EQ(static_cast<int>(seen.size()), valid);
  }
}

TEST(Search, ObservedPointsFromAnEarlierRunAreNeverProposedAgain) {
  SearchSpace space({"x"}, {10});
  auto searcher = make_searcher(Strategy::kRandom, space, SearchOptions{});
  std::vector<Point> done = {{0}, {1}, {2}, {3}, {4}, {5}, {6}};
  std::vector<double> g(done.size(), 1.0);
  ASSERT_TRUE(searcher->observe(done, g).ok());
  auto batch = searcher->propose(10);
  ASSERT_TRUE(batch.ok());
  EXPECT_THAT(*batch, ::testing::UnorderedElementsAre(Point{7}, Point{8}, Point{9}));
}

TEST(Search, BadArgumentsAreErrors) {
  SearchSpace space({"x"}, {10});
  auto searcher = make_searcher(Strategy::kGrid, space, SearchOptions{});
  EXPECT_EQ(searcher->propose(0).status().code(), StatusCode::kInvalidArgument);
  std::vector<Point> pts = {{1}};
  std::vector<double> two = {1.0, 2.0};
  EXPECT_THAT(searcher->observe(pts, two).message(), ::testing::HasSubstr("2 results for 1 points"));
  std::vector<Point> out_of_range = {{12}};
  std::vector<double> one = {1.0};
  EXPECT_THAT(searcher->observe(out_of_range, one).message(), ::testing::HasSubstr("outside [0, 10)"));
  EXPECT_EQ(parse_strategy("annealing").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*parse_strategy("xgb-sa"), Strategy::kXgbSa);
}

// A cold xgb-sa measures only a few blind points before its model steers; a warm-started one has
// a model from the start and fills whole batches.
TEST(Search, ColdAnnealingStartsWithASmallRandomBatch) {
  SearchSpace space = landscape_space();
  SearchOptions options;
  auto cold = make_searcher(Strategy::kXgbSa, space, options, knob_features);
  auto first = cold->propose(64);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(static_cast<int>(first->size()), options.sa_first_batch);
  std::vector<double> g;
  for (const Point& p : *first) g.push_back(landscape_gflops(p) + 1.0);
  ASSERT_TRUE(cold->observe(*first, g).ok());
  auto second = cold->propose(64);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_EQ(second->size(), 64u);

  auto warm = make_searcher(Strategy::kXgbSa, space, options, knob_features);
  FeatureMatrix x;
  ASSERT_TRUE(knob_features(*first, x).ok());
  std::vector<float> labels;
  for (double v : g) labels.push_back(static_cast<float>(v / 101.0));
  ASSERT_TRUE(warm->warm_start(x, labels).ok());
  auto warm_first = warm->propose(64);
  ASSERT_TRUE(warm_first.ok()) << warm_first.status().to_string();
  EXPECT_EQ(warm_first->size(), 64u);
}

TEST(Search, ModelGuidedAnnealingNeedsFarFewerTrialsThanRandom) {
  std::vector<int> sa, random;
  for (uint64_t seed : {1, 2, 3}) {
    sa.push_back(trials_to_95(Strategy::kXgbSa, seed, 1500, 32));
    random.push_back(trials_to_95(Strategy::kRandom, seed, 1500, 32));
  }
  std::sort(sa.begin(), sa.end());
  std::sort(random.begin(), random.end());
  RecordProperty("xgb_sa_median", sa[1]);
  RecordProperty("random_median", random[1]);
  EXPECT_LE(sa[1] * 2, random[1]) << "xgb-sa median " << sa[1] << " vs random " << random[1];
}

}  // namespace
}  // namespace tunefarm
