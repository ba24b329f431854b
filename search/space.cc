#include "search/space.h"

#include <cassert>
#include <limits>

#include <fmt/format.h>

namespace tunefarm {

SearchSpace::SearchSpace(std::vector<std::string> names, std::vector<int64_t> radices, Validity valid)
    : names_(std::move(names)), radices_(std::move(radices)), valid_(std::move(valid)) {
  assert(names_.size() == radices_.size());
  for (int64_t r : radices_) {
    assert(r >= 1);
    // Spaces are far smaller than 2^63 in practice; saturate rather than overflow if not.
    size_ = size_ > std::numeric_limits<int64_t>::max() / r ? std::numeric_limits<int64_t>::max() : size_ * r;
  }
}

int64_t SearchSpace::index_of(const Point& p) const {
  int64_t index = 0;
  for (int k = num_knobs() - 1; k >= 0; --k) index = index * radices_[k] + p[k];
  return index;
}

Point SearchSpace::point_at(int64_t index) const {
  Point p(radices_.size());
  for (size_t k = 0; k < radices_.size(); ++k) {
    p[k] = static_cast<int32_t>(index % radices_[k]);
    index /= radices_[k];
  }
  return p;
}

Status SearchSpace::check_range(const Point& p) const {
  if (p.size() != radices_.size())
    return invalid_argument(fmt::format("config has {} knobs, the space has {}", p.size(), radices_.size()));
  for (size_t k = 0; k < p.size(); ++k)
    if (p[k] < 0 || p[k] >= radices_[k])
      return invalid_argument(
          fmt::format("knob {} has choice {}, outside [0, {})", names_[k], p[k], radices_[k]));
  return Status();
}

bool SearchSpace::is_valid(const Point& p) const { return check_range(p).ok() && (!valid_ || valid_(p)); }

std::optional<Point> SearchSpace::sample(Rng& rng, int max_tries) const {
  Point p(radices_.size());
  for (int t = 0; t < max_tries; ++t) {
    for (size_t k = 0; k < radices_.size(); ++k)
      p[k] = static_cast<int32_t>(std::uniform_int_distribution<int64_t>(0, radices_[k] - 1)(rng));
    if (!valid_ || valid_(p)) return p;
  }
  return std::nullopt;
}

std::optional<Point> SearchSpace::neighbour(const Point& p, Rng& rng, int max_tries) const {
  std::vector<int> movable;
  for (int k = 0; k < num_knobs(); ++k)
    if (radices_[k] > 1) movable.push_back(k);
  if (movable.empty()) return std::nullopt;
  for (int t = 0; t < max_tries; ++t) {
    Point q = p;
    int k = movable[std::uniform_int_distribution<size_t>(0, movable.size() - 1)(rng)];
    // Any other value of the knob, uniformly.
    int64_t v = std::uniform_int_distribution<int64_t>(0, radices_[k] - 2)(rng);
    q[k] = static_cast<int32_t>(v >= p[k] ? v + 1 : v);
    if (!valid_ || valid_(q)) return q;
  }
  return std::nullopt;
}

double SearchSpace::valid_fraction(Rng& rng, int samples) const {
  if (!valid_) return 1.0;
  int64_t hits = 0, total = 0;
  if (size_ <= samples) {
    for (int64_t i = 0; i < size_; ++i, ++total) hits += valid_(point_at(i));
  } else {
    for (; total < samples; ++total) {
      Point p = point_at(std::uniform_int_distribution<int64_t>(0, size_ - 1)(rng));
      hits += valid_(p);
    }
  }
  return total ? static_cast<double>(hits) / total : 0.0;
}

}  // namespace tunefarm
