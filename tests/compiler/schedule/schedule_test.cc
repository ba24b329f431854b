// Schedule primitives: leaf bookkeeping and the errors that lowering reports.
#include <gtest/gtest.h>

#include "compiler/lower/lower.h"
#include "compiler/schedule/schedule.h"

namespace tunefarm::schedule {
namespace {

using ir::Var;

te::Tensor vector_add(int64_t n) {
  te::Tensor a = te::placeholder("a", {n});
  return te::compute("c", {n}, [&](const std::vector<Var>& i) { return a(i[0]) * ir::float_imm(2); }, {"i"});
}

TEST(Schedule, SplitReorderFuseKeepLeaves) {
  te::Tensor a = te::placeholder("a", {8, 6});
  te::Tensor c = te::compute("c", {8, 6}, [&](const std::vector<Var>& i) { return a(i[0], i[1]); }, {"i", "j"});
  Schedule s({c});
  auto& st = s[c];
  auto [io, ii] = st.split(st.axis(0), 4);
  // The named leaves take the positions they occupy together, in the given order.
  st.reorder({st.axis(1), io});
  ASSERT_EQ(st.leaf_iter_vars().size(), 3u);
  EXPECT_EQ(st.leaf_iter_vars()[0], st.axis(1));
  EXPECT_EQ(st.leaf_iter_vars()[1], ii);
  EXPECT_EQ(st.leaf_iter_vars()[2], io);
  st.reorder({st.axis(1), io, ii});
  auto f = st.fuse(io, ii);
  EXPECT_EQ(st.leaf_iter_vars().size(), 2u);
  EXPECT_EQ(st.leaf_iter_vars()[1], f);
  EXPECT_TRUE(s.status().ok());
}

TEST(Schedule, MisuseIsRecordedAndReportedByLowering) {
  te::Tensor c = vector_add(10);
  Schedule s({c});
  auto& st = s[c];
  auto [o, i] = st.split(st.axis(0), 4);
  st.split(st.axis(0), 2);  // No longer a leaf.
  EXPECT_FALSE(s.status().ok());
  EXPECT_NE(s.status().message().find("not a leaf"), std::string::npos) << s.status().message();
  auto f = lower::lower(s, {te::placeholder("unused", {1}), c}, "k");
  EXPECT_FALSE(f.ok());
}

TEST(Schedule, BadFactorAndNonAdjacentFuse) {
  te::Tensor a = te::placeholder("a", {4, 4, 4});
  te::Tensor c = te::compute("c", {4, 4, 4}, [&](const std::vector<Var>& i) { return a(i[0], i[1], i[2]); });
  {
    Schedule s({c});
    s[c].split(s[c].axis(0), 0);
    EXPECT_NE(s.status().message().find("positive"), std::string::npos);
  }
  {
    Schedule s({c});
    s[c].fuse(s[c].axis(0), s[c].axis(2));
    EXPECT_NE(s.status().message().find("adjacent"), std::string::npos);
  }
  {
    Schedule s({c});
    s[c].bind(s[c].axis(0), "warpIdx.x");
    EXPECT_NE(s.status().message().find("thread tag"), std::string::npos);
  }
}

TEST(Schedule, CacheWriteAddsALocalStageBeforeTheOutput) {
  te::Tensor a = te::placeholder("a", {4, 4});
  auto k = te::reduce_axis(4, "k");
  te::Tensor c = te::compute("c", {4, 4}, [&](const std::vector<Var>& i) { return te::sum(a(i[0], k->var), {k}); });
  Schedule s({c});
  te::Tensor local = s.cache_write(c, ir::MemScope::kLocal);
  ASSERT_EQ(s.stages().size(), 3u);
  EXPECT_EQ(s.stages()[1]->op(), local.op);
  EXPECT_EQ(local.op->reduce_axes.size(), 1u);
  EXPECT_TRUE(c.op->reduce_axes.empty());
  EXPECT_EQ(s[local].scope(), ir::MemScope::kLocal);
}

}  // namespace
}  // namespace tunefarm::schedule
