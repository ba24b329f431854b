// Bound inference: regions of stages computed inside a consumer's loops, and derived extents.
#include <gtest/gtest.h>

#include "compiler/ir/printer.h"
#include "compiler/lower/bound_inference.h"

namespace tunefarm::lower {
namespace {

using ir::Var;

TEST(BoundInference, SplitExtentsWithTail) {
  te::Tensor a = te::placeholder("a", {10});
  te::Tensor c = te::compute("c", {10}, [&](const std::vector<Var>& i) { return a(i[0]); }, {"i"});
  schedule::Schedule s({c});
  auto [o, i] = s[c].split(s[c].axis(0), 4);
  auto b = infer_bounds(s);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  const StageBounds& sb = b->stages.at(&s[c]);
  EXPECT_EQ(ir::to_string(sb.extent.at(o.get())), "3");
  EXPECT_EQ(ir::to_string(sb.extent.at(i.get())), "min(4, (10 - (i.o*4)))");
  EXPECT_EQ(sb.extent_bound.at(i.get()), 4);
  EXPECT_EQ(ir::to_string(sb.value.at(s[c].axis(0).get())), "((i.o*4) + i.i)");
}

TEST(BoundInference, ProducerAtConsumerTileCoversItsWindow) {
  // b is a 3-point stencil of a padded copy p; p computed per tile of 8 outputs needs 10 points.
  te::Tensor a = te::placeholder("a", {32});
  te::Tensor p = te::compute("p", {34}, [&](const std::vector<Var>& i) { return a(ir::min(i[0], ir::int_imm(31))); }, {"x"});
  te::Tensor b = te::compute("b", {32}, [&](const std::vector<Var>& i) {
    return p(i[0]) + p(i[0] + 1) + p(i[0] + 2);
  }, {"i"});
  schedule::Schedule s({b});
  auto [o, in] = s[b].split(s[b].axis(0), 8);
  s[p].compute_at(s[b], o);
  auto bounds = infer_bounds(s);
  ASSERT_TRUE(bounds.ok()) << bounds.status().to_string();
  const StageBounds& pb = bounds->stages.at(&s[p]);
  EXPECT_EQ(ir::to_string(pb.root_min[0]), "(i.o*8)");
  EXPECT_EQ(ir::to_string(pb.root_extent[0]), "10");
}

TEST(BoundInference, ComputeAtANonConsumerIsAnError) {
  te::Tensor a = te::placeholder("a", {8});
  te::Tensor p = te::compute("p", {8}, [&](const std::vector<Var>& i) { return a(i[0]); });
  te::Tensor q = te::compute("q", {8}, [&](const std::vector<Var>& i) { return a(i[0]); });
  te::Tensor r = te::compute("r", {8}, [&](const std::vector<Var>& i) { return p(i[0]) + q(i[0]); });
  schedule::Schedule s({r});
  s[p].compute_at(s[q], s[q].axis(0));
  auto b = infer_bounds(s);
  EXPECT_FALSE(b.ok());
}

// A row-wise step: p is read by out and by q, a statistic of p's row that is computed beside it
// at out's row loop; p's region there is the whole row, which q reads (out reads one element).
TEST(BoundInference, AReaderComputedAtTheSamePlaceWidensTheRegion) {
  te::Tensor x = te::placeholder("x", {4, 8});
  te::Tensor p = te::compute("p", {4, 8}, [&](const std::vector<Var>& i) { return x(i[0], i[1]) * ir::float_imm(2); });
  auto k = te::reduce_axis(8, "k");
  te::Tensor q = te::compute("q", {4}, [&](const std::vector<Var>& i) { return te::sum(p(i[0], k->var), {k}); });
  te::Tensor out = te::compute("out", {4, 8}, [&](const std::vector<Var>& i) { return p(i[0], i[1]) / q(i[0]); }, {"r", "c"});
  schedule::Schedule s({out});
  s[p].compute_at(s[out], s[out].axis(0));
  s[q].compute_at(s[out], s[out].axis(0));
  auto bounds = infer_bounds(s);
  ASSERT_TRUE(bounds.ok()) << bounds.status().to_string();
  const StageBounds& pb = bounds->stages.at(&s[p]);
  EXPECT_EQ(ir::to_string(pb.root_min[0]), "r");
  EXPECT_EQ(ir::to_string(pb.root_extent[0]), "1");
  EXPECT_EQ(ir::to_string(pb.root_min[1]), "0");
  EXPECT_EQ(ir::to_string(pb.root_extent[1]), "8");

  // A reader computed anywhere else (q at the root) would read rows that p never holds there.
  schedule::Schedule apart({out});
  apart[p].compute_at(apart[out], apart[out].axis(0));
  EXPECT_FALSE(infer_bounds(apart).ok());
}

// A GEMM's packed block of B: p is computed at out's block loop, outside the point where its
// reader t (the register tile) is computed; p's region covers t's reads over the loops between.
TEST(BoundInference, AStageOutsideItsReadersAttachPointCoversTheLoopsBetween) {
  te::Tensor x = te::placeholder("x", {32});
  te::Tensor p = te::compute("p", {32}, [&](const std::vector<Var>& i) { return x(i[0]); }, {"x"});
  te::Tensor t = te::compute("t", {32}, [&](const std::vector<Var>& i) { return p(i[0]) * ir::float_imm(2); }, {"t"});
  te::Tensor out = te::compute("out", {32}, [&](const std::vector<Var>& i) { return t(i[0]); }, {"i"});
  schedule::Schedule s({out});
  auto [o, in] = s[out].split(s[out].axis(0), 8);
  auto [m, r] = s[out].split(in, 4);
  s[t].compute_at(s[out], m);
  s[p].compute_at(s[out], o);
  auto bounds = infer_bounds(s);
  ASSERT_TRUE(bounds.ok()) << bounds.status().to_string();
  EXPECT_EQ(ir::to_string(bounds->stages.at(&s[t]).root_extent[0]), "4");
  const StageBounds& pb = bounds->stages.at(&s[p]);
  EXPECT_EQ(ir::to_string(pb.root_min[0]), "(i.o*8)");
  EXPECT_EQ(ir::to_string(pb.root_extent[0]), "8");

  // The other way round, the reader's attach point outside the stage's, is an error.
  schedule::Schedule inverted({out});
  auto [o2, in2] = inverted[out].split(inverted[out].axis(0), 8);
  auto [m2, r2] = inverted[out].split(in2, 4);
  inverted[t].compute_at(inverted[out], o2);
  inverted[p].compute_at(inverted[out], m2);
  EXPECT_FALSE(infer_bounds(inverted).ok());
}

}  // namespace
}  // namespace tunefarm::lower
