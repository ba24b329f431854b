// Search strategies over a SearchSpace. Each proposes batches of valid points that were never
// proposed before and learns from the measured throughput of earlier batches:
//   xgb-sa   simulated annealing scored by the XGBoost cost model (AutoTVM's XGBTuner defaults:
//            128 persistent chains, up to 500 steps, temperature 1 -> 0, early stop when the top
//            list stops changing) plus an epsilon share of random points;
//   random   uniform valid points;
//   grid     index order;
//   genetic  AutoTVM's GATuner: elites, crossover, mutation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "tuner/cost_model.h"
#include "tuner/space.h"

namespace tunefarm {

enum class Strategy { kXgbSa, kRandom, kGrid, kGenetic };

std::string_view strategy_name(Strategy s);
StatusOr<Strategy> parse_strategy(std::string_view name);

// Fills one feature row per point (all rows the same width).
using FeatureFn = std::function<Status(std::span<const Point> points, FeatureMatrix& out)>;

struct SearchOptions {
  uint64_t seed = 1;
  double epsilon = 0.05;          // Share of each xgb-sa batch drawn at random.
  // xgb-sa with nothing to learn from yet proposes this many random points, not a full batch: the
  // model steers from the next batch on instead of after a whole batch of blind measurements.
  int sa_first_batch = 16;
  int sa_chains = 128;
  int sa_max_steps = 500;
  int sa_early_stop = 50;         // Steps without a change in the top list before stopping.
  ModelOptions model;
  int genetic_population = 64;
  int genetic_elites = 8;
  double genetic_mutation = 0.1;  // Per-knob mutation probability.
};

class Searcher {
 public:
  Searcher(const SearchSpace& space, const SearchOptions& options);
  virtual ~Searcher() = default;

  virtual std::string_view name() const = 0;

  // Up to `n` valid points never proposed or recorded before; fewer when the space runs out.
  StatusOr<std::vector<Point>> propose(int n);

  // Measured throughput of points (GFLOP/s; 0 for a failed config). Points may come from earlier
  // runs (a resumed job), in which case they also count as visited.
  Status observe(std::span<const Point> points, std::span<const double> gflops);

  // Points to propose before any of the strategy's own (e.g. the template's default config);
  // visited or invalid ones are skipped.
  void suggest(std::vector<Point> points);

  // Trains the strategy's model on related history (features and labels normalised to [0, 1]);
  // strategies without a model ignore it.
  virtual Status warm_start(const FeatureMatrix&, std::span<const float>) { return Status(); }

  // Whether measured results steer later proposals (false for random and grid search).
  virtual bool learns() const { return true; }

  bool visited(const Point& p) const { return visited_.count(space_.index_of(p)) > 0; }
  int64_t num_visited() const { return static_cast<int64_t>(visited_.size()); }

 protected:
  virtual StatusOr<std::vector<Point>> propose_new(int n) = 0;
  virtual Status learn(std::span<const Point> points, std::span<const double> gflops) = 0;

  // Up to `n` random valid points, neither visited nor in `taken`; adds them to `taken`.
  std::vector<Point> random_unvisited(int n, std::unordered_set<int64_t>& taken);

  const SearchSpace& space_;
  SearchOptions options_;
  Rng rng_;
  std::unordered_set<int64_t> visited_;
  std::vector<Point> suggested_;
};

// `features` and `model` are used by xgb-sa only (it owns the model it is given).
std::unique_ptr<Searcher> make_searcher(Strategy strategy, const SearchSpace& space, const SearchOptions& options,
                                        FeatureFn features = {}, std::unique_ptr<CostModel> model = nullptr);

}  // namespace tunefarm
