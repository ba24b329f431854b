#include "search/search_strategies.h"

namespace tunefarm {

StatusOr<std::vector<Point>> RandomSearcher::propose_new(int n) {
  std::unordered_set<int64_t> taken;
  return random_unvisited(n, taken);
}

}  // namespace tunefarm
