// The concrete strategies behind make_searcher(); internal to tuner/.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "search/search.h"

namespace tunefarm {

class RandomSearcher : public Searcher {
 public:
  using Searcher::Searcher;
  std::string_view name() const override { return "random"; }
  bool learns() const override { return false; }

 protected:
  StatusOr<std::vector<Point>> propose_new(int n) override;
  Status learn(std::span<const Point>, std::span<const double>) override { return Status(); }
};

class GridSearcher : public Searcher {
 public:
  using Searcher::Searcher;
  std::string_view name() const override { return "grid"; }
  bool learns() const override { return false; }

 protected:
  StatusOr<std::vector<Point>> propose_new(int n) override;
  Status learn(std::span<const Point>, std::span<const double>) override { return Status(); }

 private:
  int64_t cursor_ = 0;
};

class GeneticSearcher : public Searcher {
 public:
  using Searcher::Searcher;
  std::string_view name() const override { return "genetic"; }

 protected:
  StatusOr<std::vector<Point>> propose_new(int n) override;
  Status learn(std::span<const Point> points, std::span<const double> gflops) override;

 private:
  struct Member {
    Point point;
    double fitness;
  };
  std::vector<Member> population_;  // Best measured points, fittest first.
};

class XgbSaSearcher : public Searcher {
 public:
  XgbSaSearcher(const SearchSpace& space, const SearchOptions& options, FeatureFn features,
                std::unique_ptr<CostModel> model);
  std::string_view name() const override { return "xgb-sa"; }

  const CostModel& model() const { return *model_; }
  Status warm_start(const FeatureMatrix& x, std::span<const float> labels) override { return model_->fit_base(x, labels); }

 protected:
  StatusOr<std::vector<Point>> propose_new(int n) override;
  Status learn(std::span<const Point> points, std::span<const double> gflops) override;

 private:
  // Model scores of `points`, computing features only for points not seen before.
  StatusOr<std::vector<float>> score(const std::vector<Point>& points);
  Status features_of(std::span<const Point> points, FeatureMatrix& out);

  FeatureFn features_;
  std::unique_ptr<CostModel> model_;
  std::vector<Point> chains_;                               // Persist between batches.
  std::unordered_map<int64_t, std::vector<float>> cache_;  // Features by point index.
  FeatureMatrix train_x_;
  std::vector<double> train_gflops_;
};

}  // namespace tunefarm
