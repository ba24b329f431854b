#include <algorithm>

#include "search/search_strategies.h"

namespace tunefarm {

Status GeneticSearcher::learn(std::span<const Point> points, std::span<const double> gflops) {
  for (size_t i = 0; i < points.size(); ++i) population_.push_back({points[i], gflops[i]});
  std::stable_sort(population_.begin(), population_.end(),
                   [](const Member& a, const Member& b) { return a.fitness > b.fitness; });
  if (static_cast<int>(population_.size()) > options_.genetic_population)
    population_.resize(options_.genetic_population);
  return Status();
}

StatusOr<std::vector<Point>> GeneticSearcher::propose_new(int n) {
  std::unordered_set<int64_t> taken;
  double total = 0;
  for (const Member& m : population_) total += m.fitness;
  if (population_.size() < 2 || total <= 0) return random_unvisited(n, taken);

  // Parents are drawn in proportion to fitness; children take each knob from either parent and
  // then mutate each knob with a small probability.
  std::vector<double> weights;
  for (const Member& m : population_) weights.push_back(m.fitness);
  std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
  std::uniform_real_distribution<double> coin(0.0, 1.0);

  std::vector<Point> out;
  const int max_attempts = n * 50;
  for (int attempt = 0; attempt < max_attempts && static_cast<int>(out.size()) < n; ++attempt) {
    const Point& a = population_[pick(rng_)].point;
    const Point& b = population_[pick(rng_)].point;
    Point child(a.size());
    for (size_t k = 0; k < a.size(); ++k) {
      child[k] = coin(rng_) < 0.5 ? a[k] : b[k];
      if (coin(rng_) < options_.genetic_mutation)
        child[k] = static_cast<int32_t>(std::uniform_int_distribution<int64_t>(0, space_.radices()[k] - 1)(rng_));
    }
    int64_t idx = space_.index_of(child);
    if (visited_.count(idx) || taken.count(idx) || !space_.is_valid(child)) continue;
    taken.insert(idx);
    out.push_back(std::move(child));
  }
  // Crossover can run dry on a converged population: top up with random points.
  auto rest = random_unvisited(n - static_cast<int>(out.size()), taken);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

}  // namespace tunefarm
