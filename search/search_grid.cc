#include "search/search_strategies.h"

namespace tunefarm {

StatusOr<std::vector<Point>> GridSearcher::propose_new(int n) {
  std::vector<Point> out;
  for (; cursor_ < space_.size() && static_cast<int>(out.size()) < n; ++cursor_) {
    if (visited_.count(cursor_)) continue;
    Point p = space_.point_at(cursor_);
    if (space_.is_valid(p)) out.push_back(std::move(p));
  }
  return out;
}

}  // namespace tunefarm
