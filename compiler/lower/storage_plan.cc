#include "compiler/lower/storage_plan.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

namespace tunefarm::lower {

using namespace ir;

namespace {

// Below this many bytes an intermediate tensor at the root lives on the stack.
constexpr int64_t kStackLimitBytes = 64 * 1024;

// Tensor dimensions sorted by where their innermost loop sits in the stage's loop order.
std::vector<size_t> loop_order_layout(const schedule::Stage& st) {
  const auto& axes = st.op()->axes;
  std::unordered_map<const te::IterVarNode*, std::vector<size_t>> roots_of;
  for (size_t d = 0; d < axes.size(); ++d) roots_of[axes[d].get()] = {d};
  for (const auto& rel : st.relations()) {
    if (rel.kind == schedule::Relation::Kind::kSplit) {
      roots_of[rel.outer.get()] = roots_of[rel.parent.get()];
      roots_of[rel.inner.get()] = roots_of[rel.parent.get()];
    } else {
      auto r = roots_of[rel.outer.get()];
      const auto& ri = roots_of[rel.inner.get()];
      r.insert(r.end(), ri.begin(), ri.end());
      roots_of[rel.fused.get()] = r;
    }
  }
  std::vector<size_t> innermost(axes.size(), 0);
  const auto& leaves = st.leaf_iter_vars();
  for (size_t k = 0; k < leaves.size(); ++k)
    for (size_t d : roots_of[leaves[k].get()]) innermost[d] = std::max(innermost[d], k);
  std::vector<size_t> order(axes.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return innermost[a] < innermost[b]; });
  return order;
}

}  // namespace

StatusOr<StoragePlan> plan_storage(const schedule::Schedule& sched, const Bounds& bounds,
                                   const std::vector<te::Tensor>& args) {
  StoragePlan plan;
  std::unordered_set<const BufferNode*> arg_buffers;
  for (const auto& t : args) arg_buffers.insert(t.buffer().get());
  for (const auto& st : sched.stages()) {
    const auto& op = st->op();
    bool is_arg = arg_buffers.count(op->buffer.get()) > 0;
    if (op->kind == te::OperationNode::Kind::kPlaceholder || sched.is_output(op.get())) {
      if (!is_arg) return invalid_argument(fmt::format("tensor {} is an input or output but not a kernel argument", op->name));
      continue;
    }
    const StageBounds& sb = bounds.stages.at(st.get());
    std::vector<int64_t> shape;
    for (size_t d = 0; d < op->axes.size(); ++d) {
      auto b = const_bounds(sb.root_extent[d], bounds.ranges);
      if (!b) return internal_error(fmt::format("stage {}: region of unknown size", op->name));
      shape.push_back(std::max<int64_t>(1, b->hi));
    }
    MemScope scope = st->scope();
    if (scope == MemScope::kGlobal) {
      int64_t bytes = op->buffer->dtype.bytes();
      for (int64_t d : shape) bytes *= d;
      scope = st->attached() ? MemScope::kLocal : bytes <= kStackLimitBytes ? MemScope::kStack : MemScope::kWorkspace;
    }
    PlannedBuffer r;
    r.order = st->attached() ? loop_order_layout(*st) : std::vector<size_t>();
    if (r.order.empty())
      for (size_t d = 0; d < op->axes.size(); ++d) r.order.push_back(d);
    std::vector<int64_t> laid_out;
    for (size_t d : r.order) laid_out.push_back(shape[d]);
    r.buffer = make_buffer(op->name, op->buffer->dtype, laid_out, scope);
    for (size_t d = 0; d < op->axes.size(); ++d) r.min.push_back(st->attached() ? sb.root_min[d] : int_imm(0));
    plan.buffers[op->buffer.get()] = std::move(r);
    if (st->attached()) plan.attached[st->attach_iv().get()].push_back(st.get());
  }
  return plan;
}

}  // namespace tunefarm::lower
