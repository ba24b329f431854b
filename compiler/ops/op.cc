#include "compiler/ops/op.h"

#include <algorithm>
#include <tuple>

#include "compiler/schedule/schedule.h"
#include "compiler/te/widen_reductions.h"

namespace tunefarm::ops {

const std::vector<OpDef>& op_library() {
  static const std::vector<OpDef> kOps = [] {
    std::vector<OpDef> ops = gemm_ops();
    for (auto& op : conv_ops()) ops.push_back(std::move(op));
    for (auto& op : blocked_conv_ops()) ops.push_back(std::move(op));
    return ops;
  }();
  return kOps;
}

const OpDef* find_op(std::string_view name) {
  for (const auto& op : op_library())
    if (op.name == name) return &op;
  return nullptr;
}

const Template* find_template(const OpDef& op, std::string_view name) {
  for (const auto& t : op.templates)
    if (t.name == name) return &t;
  return nullptr;
}

const Template* default_template(const OpDef& op, const Target& target, const Workload& workload) {
  const Template* first = nullptr;
  for (const auto& t : op.templates) {
    if (t.target_kind != target.kind || (t.accepts && !t.accepts(workload).ok())) continue;
    if (!first) first = &t;
    if (t.preferred && t.preferred(workload)) return &t;
  }
  return first;
}

Scheduled reference_schedule(const ComputeDef& def, Target::Kind kind) {
  std::vector<te::Tensor> args = te::widen_reductions(def.args(), ir::Type::f64());
  const te::Tensor& output = args.back();
  auto s = std::make_unique<schedule::Schedule>(std::vector<te::Tensor>{output});
  if (kind == Target::Kind::kCUDA) {
    auto& st = (*s)[output];
    te::IterVar fused = st.axis(0);
    for (size_t d = 1; d < output.shape().size(); ++d) fused = st.fuse(fused, st.axis(d));
    auto [bx, tx] = st.split(fused, 64);
    st.bind(bx, "blockIdx.x");
    st.bind(tx, "threadIdx.x");
    for (const auto& stage : s->stages()) {
      if (stage->op() == output.op || stage->op()->kind == te::OperationNode::Kind::kPlaceholder) continue;
      stage->compute_at(st, tx);
    }
  }
  return Scheduled{std::move(s), std::move(args)};
}

namespace {

constexpr int64_t kLanes = 16;

// Runs a stage's innermost axis as vectors of 16: inside the stage's reduction if it has one (the
// vector holds that many outputs, each accumulating its own terms). A reduction's axis of up to 4
// vectors runs them all inside the reduction, unrolled: that many independent accumulators, one
// pass over what the reduction reads (a row statistic's chains, model/operators.cc).
void vectorize_innermost(schedule::Stage& st) {
  const auto& shape = st.op()->buffer->shape;
  if (shape.empty() || shape.back() <= 1) return;
  constexpr int64_t kChains = 4;
  te::IterVar lanes = st.axis(shape.size() - 1), chains;
  if (shape.back() > kLanes) std::tie(chains, lanes) = st.split(lanes, kLanes);
  if (!st.op()->reduce_axes.empty()) {
    bool inside = chains && shape.back() <= kLanes * kChains;
    std::vector<te::IterVar> order(st.leaf_iter_vars().begin(), st.leaf_iter_vars().end());
    order.erase(std::remove(order.begin(), order.end(), lanes), order.end());
    if (inside) {
      order.erase(std::remove(order.begin(), order.end(), chains), order.end());
      order.push_back(chains);
      st.unroll(chains);
    }
    order.push_back(lanes);
    st.reorder(order);
  }
  st.vectorize(lanes);
}

// A row-wise step (softmax, layer normalization): an output of rows whose every other stage is of
// those rows, a statistic per row ([rows...]) or a row-shaped part of one ([rows..., m]).
bool is_row_wise(const schedule::Schedule& s, const te::Tensor& output) {
  const auto& shape = output.shape();
  if (shape.size() < 2 || shape.back() <= 1 || !output.op->reduce_axes.empty()) return false;
  for (const auto& stage : s.stages()) {
    const auto& op = stage->op();
    if (op == output.op || op->kind != te::OperationNode::Kind::kCompute) continue;
    const auto& extent = op->buffer->shape;
    if (extent.size() + 1 < shape.size() || extent.size() > shape.size() ||
        !std::equal(shape.begin(), shape.end() - 1, extent.begin(), extent.begin() + static_cast<std::ptrdiff_t>(shape.size() - 1)))
      return false;
  }
  return true;
}

}  // namespace

Scheduled plain_schedule(const ComputeDef& def, bool vectorize, bool parallel) {
  auto s = std::make_unique<schedule::Schedule>(std::vector<te::Tensor>{def.output});
  // A reduction over windows or planes (pooling, a spatial mean) of a vector of outputs (a channel
  // block) sums or maxes into a local vector, written once: accumulated in the output itself, each
  // term was a load, an operation and a store whose address the compiler cannot prove the input
  // does not share, one chain through memory (ResNet-18's 3x3 max pooling 0.26 ms, ONNX Runtime's
  // 0.12). Wider outputs keep the chains vectorize_innermost gives them.
  bool accumulate = vectorize && !def.output.op->reduce_axes.empty() && def.output.shape().size() >= 2 &&
                    def.output.shape().back() > 1 && def.output.shape().back() <= kLanes;
  te::Tensor acc;
  if (accumulate) acc = s->cache_write(def.output, ir::MemScope::kLocal);
  auto& st = (*s)[def.output];
  const auto& shape = def.output.shape();
  size_t last = shape.size() - 1;
  te::IterVar row = last > 0 ? st.axis(last - 1) : te::IterVar();
  // In parallel: the first axis longer than one (the ones outside it run once: a batch of 1), fused
  // with the axes inside it, short of the innermost, until there are enough iterations to share
  // among threads (a softmax over 2 heads would otherwise run on 2 threads at most, a step of 3
  // channels unevenly on 2; its 2 x 384 rows do not).
  constexpr int64_t kEnoughIterations = 16;
  size_t first = 0;
  while (first < last && shape[first] <= 1) ++first;
  if (parallel && first < last) {
    te::IterVar outer = st.axis(first);
    int64_t iterations = shape[first];
    for (size_t d = first + 1; d < last && iterations < kEnoughIterations; ++d) {
      bool is_row = st.axis(d) == row;
      outer = st.fuse(outer, st.axis(d));
      iterations *= shape[d];
      if (is_row) row = outer;
    }
    st.parallel(outer);
  }
  // A row-wise step computes each row's statistics beside the row, inside the output's loop over
  // rows: one pass per row over data in the L1 cache, and the rows in parallel.
  bool rows = !accumulate && is_row_wise(*s, def.output);
  for (const auto& stage : s->stages()) {
    const auto& op = stage->op();
    if (op == def.output.op || op->kind != te::OperationNode::Kind::kCompute || (accumulate && op == acc.op)) continue;
    bool row_shaped = op->buffer->shape.size() == shape.size();
    if (rows) stage->compute_at(st, row);
    if (!vectorize) continue;
    // Stages before the output without a reduction (a padded copy of the input) vectorize the same
    // way; in a row-wise step only the row-shaped ones (with a reduction: its partial statistics
    // in lanes), not the statistics, which are one value per row.
    if (rows ? row_shaped : op->reduce_axes.empty()) vectorize_innermost(*stage);
  }
  if (vectorize) vectorize_innermost(st);
  if (accumulate) {
    // Beside each few vectors of outputs along the axis outside the lanes (a row's columns), one
    // independent accumulator each, the window's terms unrolled over them: one chain of maxima a
    // vector left a 3x3 pooling bound by the operation's latency (0.076 ms for 192 channels at
    // 28x28, ONNX Runtime 0.020).
    constexpr int64_t kColumns = 4;
    const auto& leaves = st.leaf_iter_vars();
    te::IterVar at = leaves[leaves.size() - 2], columns;
    bool split = at == st.axis(last - 1) && shape[last - 1] >= kColumns;
    if (split) {
      // The copy out unrolled too: an accumulator indexed by a loop stays in memory.
      std::tie(at, columns) = st.split(at, kColumns);
      st.unroll(columns);
    }
    auto& a = (*s)[acc];
    a.compute_at(st, at);
    vectorize_innermost(a);
    if (split) {
      std::vector<te::IterVar> order(a.leaf_iter_vars().begin(), a.leaf_iter_vars().end());
      te::IterVar lanes = order.back(), column = a.axis(last - 1);
      order.erase(std::remove(order.begin(), order.end(), column), order.end());
      order.insert(order.end() - 1, column);
      a.reorder(order);
      a.unroll(column);
    }
  }
  return Scheduled{std::move(s), def.args()};
}

}  // namespace tunefarm::ops
