#include "search/search.h"

#include <fmt/format.h>

#include "search/search_strategies.h"

namespace tunefarm {

std::string_view strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kXgbSa: return "xgb-sa";
    case Strategy::kRandom: return "random";
    case Strategy::kGrid: return "grid";
    case Strategy::kGenetic: return "genetic";
  }
  return "unknown";
}

StatusOr<Strategy> parse_strategy(std::string_view name) {
  for (Strategy s : {Strategy::kXgbSa, Strategy::kRandom, Strategy::kGrid, Strategy::kGenetic})
    if (name == strategy_name(s)) return s;
  return invalid_argument(fmt::format("unknown search strategy '{}' (known: xgb-sa, random, grid, genetic)", name));
}

Searcher::Searcher(const SearchSpace& space, const SearchOptions& options)
    : space_(space), options_(options), rng_(options.seed) {}

void Searcher::suggest(std::vector<Point> points) {
  suggested_.insert(suggested_.end(), std::make_move_iterator(points.begin()), std::make_move_iterator(points.end()));
}

StatusOr<std::vector<Point>> Searcher::propose(int n) {
  if (n <= 0) return invalid_argument(fmt::format("batch size {} must be positive", n));
  std::vector<Point> points;
  size_t used = 0;
  for (; used < suggested_.size() && static_cast<int>(points.size()) < n; ++used) {
    Point& p = suggested_[used];
    if (!space_.is_valid(p) || visited_.count(space_.index_of(p))) continue;
    visited_.insert(space_.index_of(p));
    points.push_back(std::move(p));
  }
  suggested_.erase(suggested_.begin(), suggested_.begin() + static_cast<std::ptrdiff_t>(used));
  if (static_cast<int>(points.size()) < n) {
    TF_ASSIGN_OR_RETURN(std::vector<Point> own, propose_new(n - static_cast<int>(points.size())));
    points.insert(points.end(), std::make_move_iterator(own.begin()), std::make_move_iterator(own.end()));
  }
  for (const Point& p : points) visited_.insert(space_.index_of(p));
  return points;
}

Status Searcher::observe(std::span<const Point> points, std::span<const double> gflops) {
  if (points.size() != gflops.size())
    return invalid_argument(fmt::format("{} results for {} points", gflops.size(), points.size()));
  for (const Point& p : points) {
    TF_RETURN_IF_ERROR(space_.check_range(p));
    visited_.insert(space_.index_of(p));
  }
  if (points.empty()) return Status();
  return learn(points, gflops);
}

std::vector<Point> Searcher::random_unvisited(int n, std::unordered_set<int64_t>& taken) {
  std::vector<Point> out;
  // Give up after many misses in a row: the space (or its unvisited valid part) is exhausted.
  for (int misses = 0; static_cast<int>(out.size()) < n && misses < 200;) {
    auto p = space_.sample(rng_);
    if (!p) break;
    int64_t idx = space_.index_of(*p);
    if (visited_.count(idx) || !taken.insert(idx).second) {
      ++misses;
      continue;
    }
    misses = 0;
    out.push_back(std::move(*p));
  }
  if (static_cast<int>(out.size()) < n && space_.size() <= 1'000'000) {
    // Small or nearly exhausted space: sweep it so the last valid points are still found.
    for (int64_t i = 0; i < space_.size() && static_cast<int>(out.size()) < n; ++i) {
      if (visited_.count(i) || taken.count(i)) continue;
      Point p = space_.point_at(i);
      if (!space_.is_valid(p)) continue;
      taken.insert(i);
      out.push_back(std::move(p));
    }
  }
  return out;
}

std::unique_ptr<Searcher> make_searcher(Strategy strategy, const SearchSpace& space, const SearchOptions& options,
                                        FeatureFn features, std::unique_ptr<CostModel> model) {
  switch (strategy) {
    case Strategy::kXgbSa:
      return std::make_unique<XgbSaSearcher>(space, options, std::move(features),
                                             model ? std::move(model) : std::make_unique<CostModel>(options.model));
    case Strategy::kRandom: return std::make_unique<RandomSearcher>(space, options);
    case Strategy::kGrid: return std::make_unique<GridSearcher>(space, options);
    case Strategy::kGenetic: return std::make_unique<GeneticSearcher>(space, options);
  }
  return nullptr;
}

}  // namespace tunefarm
