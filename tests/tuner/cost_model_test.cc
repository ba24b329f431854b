#include "tuner/cost_model.h"

#include <cmath>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tunefarm {
namespace {

// A stand-in for "throughput as a function of schedule features": smooth in some features,
// with an interaction, flat in others.
float synthetic_speed(std::span<const float> f, float shift) {
  float v = std::exp(-std::pow(f[0] - 3.0f - shift, 2.0f)) + 0.5f * std::exp(-std::pow(f[1] - 1.0f, 2.0f));
  v += f[2] > 2.0f ? 0.3f * f[3] : 0.0f;
  return v;
}

void make_data(int n, uint64_t seed, float shift, FeatureMatrix& x, std::vector<float>& y) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 5.0f);
  for (int i = 0; i < n; ++i) {
    float row[6];
    for (float& v : row) v = u(rng);
    ASSERT_TRUE(x.add_row(row).ok());
    y.push_back(synthetic_speed(row, shift));
  }
  float best = *std::max_element(y.begin(), y.end());
  for (float& v : y) v /= best;
}

// Share of pairs (i, j) with y_i > y_j that the scores order the same way; 0.5 is chance.
double pairwise_accuracy(const std::vector<float>& scores, const std::vector<float>& y) {
  int64_t agree = 0, total = 0;
  for (size_t i = 0; i < y.size(); ++i)
    for (size_t j = 0; j < y.size(); ++j)
      if (y[i] > y[j] + 1e-6f) {
        ++total;
        agree += scores[i] > scores[j];
      }
  return total ? static_cast<double>(agree) / total : 0.0;
}

TEST(CostModel, RanksAHeldOutSetFarBetterThanChance) {
  for (auto objective : {ModelOptions::Objective::kRank, ModelOptions::Objective::kRegression}) {
    FeatureMatrix train_x, test_x;
    std::vector<float> train_y, test_y;
    make_data(300, 1, 0.0f, train_x, train_y);
    make_data(200, 2, 0.0f, test_x, test_y);
    ModelOptions options;
    options.objective = objective;
    CostModel model(options);
    EXPECT_FALSE(model.trained());
    ASSERT_TRUE(model.fit(train_x, train_y).ok());
    auto scores = model.predict(test_x);
    ASSERT_TRUE(scores.ok()) << scores.status().to_string();
    double acc = pairwise_accuracy(*scores, test_y);
    EXPECT_GT(acc, 0.8) << "objective " << static_cast<int>(objective);
  }
}

TEST(CostModel, TransferFromARelatedTaskHelpsWithFewSamples) {
  FeatureMatrix hist_x, few_x, test_x;
  std::vector<float> hist_y, few_y, test_y;
  make_data(500, 3, 0.3f, hist_x, hist_y);  // A related workload: the optimum moved a little.
  make_data(12, 4, 0.0f, few_x, few_y);
  make_data(200, 5, 0.0f, test_x, test_y);

  CostModel cold;
  ASSERT_TRUE(cold.fit(few_x, few_y).ok());
  CostModel warm;
  ASSERT_TRUE(warm.fit_base(hist_x, hist_y).ok());
  EXPECT_TRUE(warm.has_base());
  ASSERT_TRUE(warm.fit(few_x, few_y).ok());
  double cold_acc = pairwise_accuracy(*cold.predict(test_x), test_y);
  double warm_acc = pairwise_accuracy(*warm.predict(test_x), test_y);
  RecordProperty("cold", std::to_string(cold_acc));
  RecordProperty("warm", std::to_string(warm_acc));
  EXPECT_GT(warm_acc, cold_acc);
  EXPECT_GT(warm_acc, 0.75);
}

TEST(CostModel, UntrainedModelScoresZeroAndBadInputIsAnError) {
  FeatureMatrix x;
  float row[3] = {1, 2, 3};
  ASSERT_TRUE(x.add_row(row).ok());
  CostModel model;
  auto scores = model.predict(x);
  ASSERT_TRUE(scores.ok());
  EXPECT_THAT(*scores, ::testing::ElementsAre(0.0f));

  std::vector<float> two_labels = {1.0f, 0.5f};
  EXPECT_THAT(model.fit(x, two_labels).message(), ::testing::HasSubstr("2 labels for 1 feature rows"));
  float short_row[2] = {1, 2};
  EXPECT_THAT(x.add_row(short_row).message(), ::testing::HasSubstr("expected 3"));
  FeatureMatrix empty;
  EXPECT_EQ(model.fit(empty, {}).code(), StatusCode::kInvalidArgument);
}

TEST(CostModel, ObjectivesHaveNamesThatParseBack) {
  for (auto objective : {ModelOptions::Objective::kRank, ModelOptions::Objective::kRegression}) {
    auto parsed = parse_objective(objective_name(objective));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, objective);
  }
  EXPECT_THAT(parse_objective("lambdamart").status().message(), ::testing::HasSubstr("known: rank, regression"));
}

}  // namespace
}  // namespace tunefarm
