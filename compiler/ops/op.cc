#include "compiler/ops/op.h"

#include <algorithm>

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
    if (t.target_kind != target.kind) continue;
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

Scheduled plain_schedule(const ComputeDef& def, bool vectorize) {
  auto s = std::make_unique<schedule::Schedule>(std::vector<te::Tensor>{def.output});
  auto& st = (*s)[def.output];
  const auto& shape = def.output.shape();
  size_t last = shape.size() - 1;
  // The first axis longer than one: the ones outside it run once (a batch of 1, say).
  for (size_t d = 0; d < last; ++d)
    if (shape[d] > 1) {
      st.parallel(st.axis(d));
      break;
    }
  if (vectorize && shape[last] > 1) {
    te::IterVar lanes = st.axis(last);
    if (shape[last] > 16) {
      auto [outer, inner] = st.split(lanes, 16);
      lanes = inner;
    }
    // A reduction (pooling) runs its window outside the vector of outputs it accumulates.
    if (!def.output.op->reduce_axes.empty()) {
      std::vector<te::IterVar> order(st.leaf_iter_vars().begin(), st.leaf_iter_vars().end());
      order.erase(std::remove(order.begin(), order.end(), lanes), order.end());
      order.push_back(lanes);
      st.reorder(order);
    }
    st.vectorize(lanes);
    // Stages before the output without a reduction (a padded copy of the input) vectorize the same way.
    for (const auto& stage : s->stages()) {
      const auto& op = stage->op();
      if (op == def.output.op || op->kind != te::OperationNode::Kind::kCompute || !op->reduce_axes.empty()) continue;
      const auto& extent = op->buffer->shape;
      if (extent.empty() || extent.back() <= 1) continue;
      te::IterVar inner = stage->axis(extent.size() - 1);
      if (extent.back() > 16) inner = stage->split(inner, 16).second;
      stage->vectorize(inner);
    }
  }
  return Scheduled{std::move(s), def.args()};
}

}  // namespace tunefarm::ops
