#include "search/space.h"

#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tunefarm {
namespace {

SearchSpace make_space() {
  // Three knobs; a point is valid when its first two digits do not sum past 5 (a stand-in for
  // "the tile does not fit the registers").
  return SearchSpace({"tile_m", "tile_n", "unroll"}, {4, 5, 3}, [](const Point& p) { return p[0] + p[1] <= 5; });
}

TEST(SearchSpace, IndexRoundTripsOverTheWholeSpace) {
  SearchSpace s = make_space();
  EXPECT_EQ(s.size(), 60);
  std::set<int64_t> seen;
  for (int64_t i = 0; i < s.size(); ++i) {
    Point p = s.point_at(i);
    EXPECT_EQ(s.index_of(p), i);
    seen.insert(s.index_of(p));
  }
  EXPECT_EQ(seen.size(), 60u);
  EXPECT_EQ(s.point_at(1), (Point{1, 0, 0}));  // Knob 0 is the least significant digit.
  EXPECT_EQ(s.point_at(4), (Point{0, 1, 0}));
}

TEST(SearchSpace, ValidityAndRangeChecks) {
  SearchSpace s = make_space();
  EXPECT_TRUE(s.is_valid({1, 2, 0}));
  EXPECT_FALSE(s.is_valid({3, 4, 0}));           // Rejected by the template.
  EXPECT_FALSE(s.is_valid({0, 5, 0}));           // Out of range.
  EXPECT_THAT(s.check_range({0, 5, 0}).message(), ::testing::HasSubstr("knob tile_n has choice 5"));
  EXPECT_THAT(s.check_range({0, 1}).message(), ::testing::HasSubstr("2 knobs, the space has 3"));
  Rng rng(3);
  int valid = 0;
  for (int64_t i = 0; i < s.size(); ++i) valid += s.is_valid(s.point_at(i));
  EXPECT_DOUBLE_EQ(s.valid_fraction(rng), valid / 60.0);
}

TEST(SearchSpace, SamplesAreValidAndCoverTheValidPoints) {
  SearchSpace s = make_space();
  Rng rng(7);
  std::map<int64_t, int> counts;
  for (int i = 0; i < 20000; ++i) {
    auto p = s.sample(rng);
    ASSERT_TRUE(p.has_value());
    ASSERT_TRUE(s.is_valid(*p));
    counts[s.index_of(*p)]++;
  }
  int valid = 0;
  for (int64_t i = 0; i < s.size(); ++i) valid += s.is_valid(s.point_at(i));
  EXPECT_EQ(static_cast<int>(counts.size()), valid);
  // Uniform: no valid point drawn far more or less often than the rest.
  for (const auto& [idx, c] : counts) {
    EXPECT_GT(c, 20000 / valid / 2) << idx;
    EXPECT_LT(c, 20000 / valid * 2) << idx;
  }
}

TEST(SearchSpace, NeighboursDifferInExactlyOneKnobAndAreValid) {
  SearchSpace s = make_space();
  Rng rng(11);
  Point p{1, 1, 1};
  std::set<int64_t> reached;
  for (int i = 0; i < 500; ++i) {
    auto q = s.neighbour(p, rng);
    ASSERT_TRUE(q.has_value());
    EXPECT_TRUE(s.is_valid(*q));
    int diffs = 0;
    for (int k = 0; k < 3; ++k) diffs += (*q)[k] != p[k];
    EXPECT_EQ(diffs, 1);
    reached.insert(s.index_of(*q));
  }
  // Every valid one-knob change of {1,1,1}: 3 + 4 + 2 values.
  EXPECT_EQ(reached.size(), 9u);
  SearchSpace single({"only"}, {1});
  EXPECT_FALSE(single.neighbour({0}, rng).has_value());
}

}  // namespace
}  // namespace tunefarm
