#include <algorithm>
#include <cmath>
#include <set>

#include "search/search_strategies.h"

namespace tunefarm {

XgbSaSearcher::XgbSaSearcher(const SearchSpace& space, const SearchOptions& options, FeatureFn features,
                             std::unique_ptr<CostModel> model)
    : Searcher(space, options), features_(std::move(features)), model_(std::move(model)) {}

Status XgbSaSearcher::features_of(std::span<const Point> points, FeatureMatrix& out) {
  if (!features_) return failed_precondition("xgb-sa search needs a feature function");
  std::vector<Point> missing;
  for (const Point& p : points)
    if (!cache_.count(space_.index_of(p))) missing.push_back(p);
  if (!missing.empty()) {
    FeatureMatrix fresh;
    TF_RETURN_IF_ERROR(features_(missing, fresh));
    if (fresh.rows() != static_cast<int64_t>(missing.size()))
      return internal_error("feature function returned the wrong number of rows");
    for (size_t i = 0; i < missing.size(); ++i) {
      auto row = fresh.row(static_cast<int64_t>(i));
      cache_.emplace(space_.index_of(missing[i]), std::vector<float>(row.begin(), row.end()));
    }
  }
  for (const Point& p : points) TF_RETURN_IF_ERROR(out.add_row(cache_.at(space_.index_of(p))));
  return Status();
}

StatusOr<std::vector<float>> XgbSaSearcher::score(const std::vector<Point>& points) {
  FeatureMatrix x;
  TF_RETURN_IF_ERROR(features_of(points, x));
  return model_->predict(x);
}

Status XgbSaSearcher::learn(std::span<const Point> points, std::span<const double> gflops) {
  TF_RETURN_IF_ERROR(features_of(points, train_x_));
  train_gflops_.insert(train_gflops_.end(), gflops.begin(), gflops.end());
  double best = *std::max_element(train_gflops_.begin(), train_gflops_.end());
  // Labels are throughput relative to the best so far; with nothing working yet there is nothing
  // to rank and the next batch stays random.
  if (best <= 0) return Status();
  std::vector<float> labels;
  labels.reserve(train_gflops_.size());
  for (double g : train_gflops_) labels.push_back(static_cast<float>(std::max(0.0, g) / best));
  return model_->fit(train_x_, labels);
}

StatusOr<std::vector<Point>> XgbSaSearcher::propose_new(int n) {
  std::unordered_set<int64_t> taken;
  if (!model_->trained() && !model_->has_base()) return random_unvisited(std::min(n, options_.sa_first_batch), taken);

  // Persistent chains: start from where the previous batch's annealing ended.
  while (static_cast<int>(chains_.size()) < options_.sa_chains) {
    auto p = space_.sample(rng_);
    if (!p) break;
    chains_.push_back(std::move(*p));
  }
  if (chains_.empty()) return random_unvisited(n, taken);
  TF_ASSIGN_OR_RETURN(std::vector<float> scores, score(chains_));

  // The top list: best-scoring unvisited points seen by any chain.
  std::set<std::pair<float, int64_t>> top;
  std::unordered_map<int64_t, Point> top_points;
  const int keep = n;
  auto offer = [&](const Point& p, float s) -> bool {
    int64_t idx = space_.index_of(p);
    if (visited_.count(idx) || top_points.count(idx)) return false;
    if (static_cast<int>(top.size()) >= keep && s <= top.begin()->first) return false;
    top.emplace(s, idx);
    top_points.emplace(idx, p);
    if (static_cast<int>(top.size()) > keep) {
      top_points.erase(top.begin()->second);
      top.erase(top.begin());
    }
    return true;
  };
  for (size_t i = 0; i < chains_.size(); ++i) offer(chains_[i], scores[i]);

  std::uniform_real_distribution<double> coin(0.0, 1.0);
  int unchanged = 0;
  for (int step = 0; step < options_.sa_max_steps && unchanged < options_.sa_early_stop; ++step) {
    double temperature = 1.0 - static_cast<double>(step) / options_.sa_max_steps;
    std::vector<Point> next(chains_.size());
    for (size_t i = 0; i < chains_.size(); ++i) {
      auto q = space_.neighbour(chains_[i], rng_);
      next[i] = q ? std::move(*q) : chains_[i];
    }
    TF_ASSIGN_OR_RETURN(std::vector<float> next_scores, score(next));
    bool changed = false;
    for (size_t i = 0; i < chains_.size(); ++i) {
      changed |= offer(next[i], next_scores[i]);
      double delta = next_scores[i] - scores[i];
      if (delta >= 0 || coin(rng_) < std::exp(delta / (temperature + 1e-5))) {
        chains_[i] = std::move(next[i]);
        scores[i] = next_scores[i];
      }
    }
    unchanged = changed ? 0 : unchanged + 1;
  }

  // Best first; an epsilon share of the batch is random, to keep exploring where the model is blind.
  int n_model = n - static_cast<int>(std::lround(n * options_.epsilon));
  std::vector<Point> out;
  for (auto it = top.rbegin(); it != top.rend() && static_cast<int>(out.size()) < n_model; ++it) {
    out.push_back(top_points.at(it->second));
    taken.insert(it->second);
  }
  auto rest = random_unvisited(n - static_cast<int>(out.size()), taken);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

}  // namespace tunefarm
