#include "compiler/lower/bound_inference.h"

#include <algorithm>

#include <fmt/format.h>

#include "compiler/ir/printer.h"
#include "compiler/ir/visitor.h"
#include "compiler/lower/interval.h"

namespace tunefarm::lower {

using namespace ir;

namespace {

// Extents and values of all axes derived from the root axes by the stage's relations.
Status derive_axes(const schedule::Stage& stage, StageBounds& sb, RangeMap& ranges) {
  auto roots = stage.root_iter_vars();
  for (size_t i = 0; i < roots.size(); ++i) sb.extent[roots[i].get()] = sb.root_extent[i];
  for (const auto& rel : stage.relations()) {
    if (rel.kind == schedule::Relation::Kind::kSplit) {
      Expr e = sb.extent.at(rel.parent.get());
      Expr f = int_imm(rel.factor);
      sb.extent[rel.outer.get()] = simplify(div(add(e, int_imm(rel.factor - 1)), f), ranges);
      if (auto b = const_bounds(sb.extent[rel.outer.get()], ranges))
        ranges[rel.outer->var.get()] = {0, std::max<int64_t>(0, b->hi - 1)};
      sb.extent[rel.inner.get()] = simplify(min(f, sub(e, mul(rel.outer->var, f))), ranges);
    } else {
      Expr eo = sb.extent.at(rel.outer.get()), ei = sb.extent.at(rel.inner.get());
      if (!as_const_int(ei) || !as_const_int(eo))
        return invalid_argument(fmt::format(
            "stage {}: cannot fuse {} and {}: the axes' extents are not constant (fuse before splitting with a tail)",
            stage.op()->name, rel.outer->var->name, rel.inner->var->name));
      sb.extent[rel.fused.get()] = int_imm(*as_const_int(eo) * *as_const_int(ei));
    }
  }
  for (const auto& [iv, e] : sb.extent) {
    auto b = const_bounds(e, ranges);
    if (!b) return internal_error(fmt::format("stage {}: no constant bound for extent {}", stage.op()->name, to_string(e)));
    sb.extent_bound[iv] = b->hi;
  }
  for (const auto& leaf : stage.leaf_iter_vars()) {
    sb.value[leaf.get()] = leaf->var;
    ranges[leaf->var.get()] = {0, std::max<int64_t>(0, sb.extent_bound.at(leaf.get()) - 1)};
  }
  const auto& rels = stage.relations();
  for (auto it = rels.rbegin(); it != rels.rend(); ++it) {
    if (it->kind == schedule::Relation::Kind::kSplit) {
      sb.value[it->parent.get()] = add(mul(sb.value.at(it->outer.get()), int_imm(it->factor)), sb.value.at(it->inner.get()));
    } else {
      Expr fused = sb.value.at(it->fused.get());
      Expr ei = sb.extent.at(it->inner.get());
      sb.value[it->outer.get()] = div(fused, ei);
      sb.value[it->inner.get()] = mod(fused, ei);
    }
  }
  // An inner extent refers to its split's outer axis; when that axis was split again it has no
  // loop of its own, so express it through the leaves.
  VarMap derived;
  for (const auto& [iv, v] : sb.value)
    if (v.get() != iv->var.get()) derived[iv->var.get()] = v;
  for (auto& [iv, e] : sb.extent) e = simplify(substitute(e, derived), ranges);
  return Status();
}

// The range of `reader`'s leaves from `relax_from` on (the leaves before it stay at their loop
// variables).
StatusOr<IntervalMap> leaf_intervals(const schedule::Stage& reader, const StageBounds& rb, size_t relax_from,
                                     MemScope producer_scope) {
  const auto& leaves = reader.leaf_iter_vars();
  IntervalMap leaf_iv;
  for (size_t k = 0; k < leaves.size(); ++k) {
    bool relax = k >= relax_from || (producer_scope == MemScope::kShared && reader.annotation(leaves[k]).kind == ForKind::kGpuThread);
    if (!relax) continue;
    auto ext = eval_interval(rb.extent.at(leaves[k].get()), leaf_iv);
    if (!ext) return internal_error("bound inference: cannot bound the extent of " + leaves[k]->var->name);
    leaf_iv[leaves[k]->var.get()] = Interval{int_imm(0), sub(ext->max, int_imm(1))};
  }
  return leaf_iv;
}

// The range of each root axis of `reader` over its leaves from `relax_from` on.
StatusOr<IntervalMap> root_intervals(const schedule::Stage& reader, const StageBounds& rb, size_t relax_from,
                                     MemScope producer_scope) {
  TF_ASSIGN_OR_RETURN(IntervalMap leaf_iv, leaf_intervals(reader, rb, relax_from, producer_scope));
  IntervalMap root_iv;
  auto roots = reader.root_iter_vars();
  for (size_t r = 0; r < roots.size(); ++r) {
    auto v = eval_interval(rb.value.at(roots[r].get()), leaf_iv);
    if (!v) return internal_error("bound inference: cannot bound axis " + roots[r]->var->name);
    root_iv[roots[r]->var.get()] = Interval{add(rb.root_min[r], v->min), add(rb.root_min[r], v->max)};
  }
  return root_iv;
}

// Widens [lo, hi] to cover what `reader` reads of `producer` with its root axes over `root_iv`.
Status add_reads(const schedule::Stage& producer, const schedule::Stage& reader, const IntervalMap& root_iv,
                 std::vector<Expr>& lo, std::vector<Expr>& hi) {
  const BufferNode* target = producer.op()->buffer.get();
  Status status;
  post_order_visit(reader.op()->body, [&](const Expr& e) {
    const auto* l = e->as<Load>();
    if (!l || l->buffer.get() != target || !status.ok()) return;
    for (size_t d = 0; d < lo.size(); ++d) {
      auto iv = eval_interval(l->indices[d], root_iv);
      if (!iv) {
        status = invalid_argument(fmt::format("stage {}: cannot infer the region of {} read by {} (index {})",
                                              producer.op()->name, producer.op()->name, reader.op()->name,
                                              to_string(l->indices[d])));
        return;
      }
      lo[d] = lo[d] ? min(lo[d], iv->min) : iv->min;
      hi[d] = hi[d] ? max(hi[d], iv->max) : iv->max;
    }
  });
  return status;
}

// The region of `producer` that one iteration of its consumer's loops outside the attach point
// reads: what the consumer reads there, and what the `siblings` (stages computed at the consumer,
// at the same point or inside it) read in all of their loops and the consumer's loops between.
Status infer_region(const schedule::Stage& producer, const schedule::Stage& consumer, const Bounds& bounds,
                    const std::vector<const schedule::Stage*>& siblings, const IntervalMap& thread_vars, StageBounds& pb) {
  const auto& leaves = consumer.leaf_iter_vars();
  size_t pos = std::find(leaves.begin(), leaves.end(), producer.attach_iv()) - leaves.begin();
  bool shared = producer.scope() == MemScope::kShared;
  size_t ndim = producer.op()->axes.size();
  std::vector<Expr> lo(ndim), hi(ndim);
  const StageBounds& cb = bounds.stages.at(&consumer);
  TF_ASSIGN_OR_RETURN(IntervalMap root_iv, root_intervals(consumer, cb, pos + 1, producer.scope()));
  TF_RETURN_IF_ERROR(add_reads(producer, consumer, root_iv, lo, hi));
  TF_ASSIGN_OR_RETURN(IntervalMap inner_iv, leaf_intervals(consumer, cb, pos + 1, producer.scope()));
  for (const schedule::Stage* sibling : siblings) {
    TF_ASSIGN_OR_RETURN(IntervalMap sibling_iv, root_intervals(*sibling, bounds.stages.at(sibling), 0, producer.scope()));
    // A sibling computed inside the attach point starts its region at the consumer's inner loops:
    // widen it over them.
    for (auto& [var, iv] : sibling_iv) {
      auto l = eval_interval(iv.min, inner_iv), h = eval_interval(iv.max, inner_iv);
      if (!l || !h) return internal_error("bound inference: cannot bound the region read by " + sibling->op()->name);
      iv = Interval{l->min, h->max};
    }
    TF_RETURN_IF_ERROR(add_reads(producer, *sibling, sibling_iv, lo, hi));
  }
  // A shared-memory stage holds what the whole thread block reads: relax every thread index.
  if (shared) {
    for (size_t d = 0; d < ndim && lo[d]; ++d) {
      auto l = eval_interval(lo[d], thread_vars), h = eval_interval(hi[d], thread_vars);
      if (!l || !h) return internal_error("bound inference: cannot relax thread indices for " + producer.op()->name);
      lo[d] = l->min;
      hi[d] = h->max;
    }
  }
  for (size_t d = 0; d < ndim; ++d) {
    if (!lo[d]) return invalid_argument(fmt::format("stage {} is computed at {}, which does not read it",
                                                    producer.op()->name, consumer.op()->name));
    Expr mn = simplify(lo[d], bounds.ranges);
    pb.root_min.push_back(mn);
    // Never more than the tensor has: a block-wide tile at the edge of a matrix stops there.
    Expr extent = min(add(sub(hi[d], mn), int_imm(1)), sub(int_imm(producer.op()->axes[d]->extent), mn));
    pb.root_extent.push_back(simplify(extent, bounds.ranges));
  }
  return Status();
}

}  // namespace

StatusOr<Bounds> infer_bounds(const schedule::Schedule& sched) {
  TF_RETURN_IF_ERROR(sched.status());
  Bounds out;
  IntervalMap thread_vars;  // Every threadIdx-bound loop variable seen so far, over its range.
  const auto& stages = sched.stages();
  for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
    const schedule::Stage& stage = **it;
    const auto& op = stage.op();
    if (op->kind == te::OperationNode::Kind::kPlaceholder) continue;
    StageBounds sb;
    if (stage.attached()) {
      const schedule::Stage* consumer = stage.attach_stage();
      auto cit = out.stages.find(consumer);
      if (cit == out.stages.end())
        return invalid_argument(fmt::format("stage {} is computed at {}, which does not consume it", op->name, consumer->op()->name));
      // Other readers must be computed at the consumer, at the same point (a row's statistics
      // beside the row that reads them) or inside it (a packed block of B that the register
      // tiles inside the block's loop read): the region covers their reads too.
      std::vector<const schedule::Stage*> siblings;
      const auto& consumer_leaves = consumer->leaf_iter_vars();
      auto position = [&](const te::IterVar& iv) {
        return std::find(consumer_leaves.begin(), consumer_leaves.end(), iv) - consumer_leaves.begin();
      };
      for (const auto& other : stages) {
        if (other.get() == consumer || other.get() == &stage) continue;
        if (std::find(other->op()->inputs.begin(), other->op()->inputs.end(), op) == other->op()->inputs.end()) continue;
        if (other->attach_stage() != consumer || position(other->attach_iv()) < position(stage.attach_iv()))
          return invalid_argument(fmt::format("stage {} is computed at {} but {} reads it too", op->name,
                                              consumer->op()->name, other->op()->name));
        siblings.push_back(other.get());
      }
      TF_RETURN_IF_ERROR(infer_region(stage, *consumer, out, siblings, thread_vars, sb));
    } else {
      for (const auto& a : op->axes) {
        sb.root_min.push_back(int_imm(0));
        sb.root_extent.push_back(int_imm(a->extent));
      }
    }
    for (const auto& r : op->reduce_axes) {
      sb.root_min.push_back(int_imm(0));
      sb.root_extent.push_back(int_imm(r->extent));
    }
    TF_RETURN_IF_ERROR(derive_axes(stage, sb, out.ranges));
    for (const auto& leaf : stage.leaf_iter_vars()) {
      if (stage.annotation(leaf).kind != ForKind::kGpuThread) continue;
      const ConstRange& r = out.ranges.at(leaf->var.get());
      thread_vars[leaf->var.get()] = Interval{int_imm(r.lo), int_imm(r.hi)};
    }
    out.stages[&stage] = std::move(sb);
  }
  return out;
}

}  // namespace tunefarm::lower
