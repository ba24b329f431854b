// The cost model: XGBoost gradient-boosted trees that predict how fast a candidate will run from its
// feature vector, so the search measures only the configs that look best. Like AutoTVM's XGBTuner it
// ranks by default (rank:pairwise on throughput normalised to the best seen, failures as 0) and can
// start from a base model trained on earlier records of the same target (transfer learning): the
// base model's margin is the starting point that the per-task trees correct.
//
// A fitted model is immutable: fit() builds a new booster, so prediction from several threads is
// safe while a later fit runs on another CostModel.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tunefarm {

// Row-major float features, one row per candidate.
struct FeatureMatrix {
  int64_t cols = 0;
  std::vector<float> data;

  int64_t rows() const { return cols ? static_cast<int64_t>(data.size()) / cols : 0; }
  std::span<const float> row(int64_t i) const { return {data.data() + i * cols, static_cast<size_t>(cols)}; }
  // The first row fixes the width; later rows must match it.
  Status add_row(std::span<const float> values);
  // Appends every row of `other` (same width).
  Status append(const FeatureMatrix& other);
};

struct ModelOptions {
  enum class Objective { kRank, kRegression };
  Objective objective = Objective::kRank;
  int rounds = 60;       // Boosting rounds per fit.
  int max_depth = 6;
  double eta = 0.3;
  double min_child_weight = 1.0;
  double subsample = 1.0;
  int nthread = 1;       // Training is small; more threads mostly add spin-wait on a busy machine.
  uint64_t seed = 0;
};

std::string_view objective_name(ModelOptions::Objective objective);
// "rank" or "regression".
StatusOr<ModelOptions::Objective> parse_objective(std::string_view name);

class CostModel {
 public:
  explicit CostModel(ModelOptions options = {});
  ~CostModel();
  CostModel(CostModel&&) noexcept;
  CostModel& operator=(CostModel&&) noexcept;

  // Trains a fresh model on (x, y); y is throughput normalised to [0, 1] (0 for failed configs).
  // When a base model is set, its margins are the starting point.
  Status fit(const FeatureMatrix& x, std::span<const float> y);

  // Trains the base model from earlier records (other workloads of the same target). It stays
  // until replaced and serves every later fit.
  Status fit_base(const FeatureMatrix& x, std::span<const float> y);

  // Scores, higher meaning faster. Before any fit: the base model's scores, or all zeros.
  StatusOr<std::vector<float>> predict(const FeatureMatrix& x) const;

  bool trained() const { return booster_ != nullptr; }
  bool has_base() const { return base_ != nullptr; }
  const ModelOptions& options() const { return options_; }

 private:
  class Booster;
  StatusOr<std::shared_ptr<Booster>> train(const FeatureMatrix& x, std::span<const float> y,
                                           const Booster* base) const;

  ModelOptions options_;
  std::shared_ptr<Booster> booster_;
  std::shared_ptr<Booster> base_;
};

}  // namespace tunefarm
