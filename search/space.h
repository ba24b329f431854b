// The search's view of a template's config space: a mixed-radix space with one digit per knob
// (the index of the knob's chosen value), and a validity test that filters out points the template
// cannot build. The index of a point is its mixed-radix number, knob 0 the least significant digit.
// Mapping points to and from Configs is the template's job (compiler/ops); the search only needs
// digits, indices, validity, uniform samples and one-knob neighbours.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"

namespace tunefarm {

using Point = std::vector<int32_t>;
using Rng = std::mt19937_64;

class SearchSpace {
 public:
  using Validity = std::function<bool(const Point&)>;

  // `radices[k]` is the number of values knob k can take (>= 1). `valid` may be empty: every point
  // is valid. `names` are the knob names, for messages.
  SearchSpace(std::vector<std::string> names, std::vector<int64_t> radices, Validity valid = {});

  int num_knobs() const { return static_cast<int>(radices_.size()); }
  const std::vector<int64_t>& radices() const { return radices_; }
  const std::vector<std::string>& names() const { return names_; }
  // Number of points, valid or not.
  int64_t size() const { return size_; }

  int64_t index_of(const Point& p) const;
  Point point_at(int64_t index) const;

  // In range and accepted by the template.
  bool is_valid(const Point& p) const;
  // Why a point is out of range, naming the knob; OK for points in range (validity aside).
  Status check_range(const Point& p) const;

  // A uniformly random valid point, or nothing when `max_tries` samples all failed validity.
  std::optional<Point> sample(Rng& rng, int max_tries = 1000) const;

  // A valid point that differs from `p` in exactly one knob, or nothing after `max_tries`.
  std::optional<Point> neighbour(const Point& p, Rng& rng, int max_tries = 50) const;

  // The share of valid points, estimated from `samples` uniform draws (exact when the space is
  // smaller than that), and an estimate of the number of valid points.
  double valid_fraction(Rng& rng, int samples = 2000) const;

 private:
  std::vector<std::string> names_;
  std::vector<int64_t> radices_;
  Validity valid_;
  int64_t size_ = 1;
};

}  // namespace tunefarm
