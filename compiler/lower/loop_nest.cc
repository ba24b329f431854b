#include "compiler/lower/loop_nest.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include <fmt/format.h>

#include "compiler/ir/visitor.h"

namespace tunefarm::lower {

using namespace ir;

namespace {

// Rewrites loads of realized tensors into their buffers, rebased to the region's start.
class RebaseLoads : public IRMutator {
 public:
  explicit RebaseLoads(const std::unordered_map<const BufferNode*, PlannedBuffer>& realized) : realized_(realized) {}

 protected:
  Expr mutate_load(const Expr& e, const Load* op) override {
    Expr out = IRMutator::mutate_load(e, op);
    const auto* l = out->as<Load>();
    auto it = realized_.find(l->buffer.get());
    if (it == realized_.end()) return out;
    std::vector<Expr> idx;
    for (size_t d = 0; d < l->indices.size(); ++d) idx.push_back(sub(l->indices[d], it->second.min[d]));
    return load(it->second.buffer, it->second.permute(idx));
  }

 private:
  const std::unordered_map<const BufferNode*, PlannedBuffer>& realized_;
};

class NestBuilder {
 public:
  NestBuilder(const schedule::Schedule& sched, const Bounds& bounds, const StoragePlan& plan)
      : sched_(sched), bounds_(bounds), realized_(plan.buffers), attached_(plan.attached) {}

  StatusOr<Stmt> build_root() {
    Stmt result;
    const auto& stages = sched_.stages();
    for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
      const schedule::Stage& st = **it;
      if (st.op()->kind == te::OperationNode::Kind::kPlaceholder || st.attached()) continue;
      TF_ASSIGN_OR_RETURN(Stmt nest, build_stage(st));
      auto rit = realized_.find(st.op()->buffer.get());
      if (rit != realized_.end()) result = allocate(rit->second.buffer, block({nest, result}));
      else result = block({nest, result});
    }
    return result ? result : block({});
  }

 private:
  Buffer buffer_of(const schedule::Stage& st) const {
    auto it = realized_.find(st.op()->buffer.get());
    return it == realized_.end() ? st.op()->buffer : it->second.buffer;
  }

  StatusOr<Stmt> build_stage(const schedule::Stage& st) {
    const auto& op = st.op();
    const StageBounds& sb = bounds_.stages.at(&st);
    const auto& leaves = st.leaf_iter_vars();
    auto roots = st.root_iter_vars();
    size_t nspatial = op->axes.size();

    // A leaf whose extent depends on a loop nested inside it cannot use that extent: it runs to
    // its bound and a guard keeps the body in range.
    std::unordered_set<const VarNode*> inner_vars;
    std::vector<Expr> extents(leaves.size());
    bool need_guard = false;
    for (size_t k = leaves.size(); k-- > 0;) {
      Expr ext = sb.extent.at(leaves[k].get());
      bool inner_dep = false;
      post_order_visit(ext, [&](const Expr& e) {
        if (auto* v = e->as<VarNode>(); v && inner_vars.count(v)) inner_dep = true;
      });
      // GPU launch dimensions are constants: a bound loop with a tail runs to its bound, guarded.
      ForKind kind = st.annotation(leaves[k]).kind;
      bool gpu_tail = (kind == ForKind::kGpuBlock || kind == ForKind::kGpuThread) && !as_const_int(ext);
      if (inner_dep || gpu_tail) {
        ext = int_imm(sb.extent_bound.at(leaves[k].get()));
        need_guard = true;
      }
      extents[k] = ext;
      inner_vars.insert(leaves[k]->var.get());
    }

    VarMap abs;  // Root axis variable -> absolute index.
    std::vector<Expr> rel(roots.size());
    for (size_t r = 0; r < roots.size(); ++r) {
      rel[r] = sb.value.at(roots[r].get());
      abs[roots[r]->var.get()] = add(sb.root_min[r], rel[r]);
    }
    auto guard = [&](Stmt body, bool spatial_only) -> Stmt {
      if (!need_guard) return body;
      Expr cond;
      for (size_t r = 0; r < roots.size(); ++r) {
        if (spatial_only && r >= nspatial) break;
        Expr c = lt(rel[r], sb.root_extent[r]);
        cond = cond ? logical_and(cond, c) : c;
      }
      return cond ? if_then_else(cond, body) : body;
    };

    Buffer out = buffer_of(st);
    std::vector<Expr> out_idx(rel.begin(), rel.begin() + nspatial);
    if (auto rit = realized_.find(op->buffer.get()); rit != realized_.end()) out_idx = rit->second.permute(out_idx);
    Expr body_expr = RebaseLoads(realized_).mutate(substitute(op->body, abs));
    Stmt provide, init;
    if (const auto* red = body_expr->as<Reduce>()) {
      Expr acc = load(out, out_idx);
      Expr combined = red->op == ReduceOp::kSum ? add(acc, red->source) : max(acc, red->source);
      provide = store(out, combined, out_idx);
      Expr identity = float_imm(red->op == ReduceOp::kSum ? 0.0 : -std::numeric_limits<double>::infinity(), out->dtype);
      init = guard(store(out, identity, out_idx), true);
    } else {
      provide = store(out, body_expr, out_idx);
    }
    Stmt body = guard(provide, false);

    // The initialisation goes right before the outermost loop over a reduction axis and covers
    // the spatial loops nested inside that position.
    size_t first_reduce = leaves.size();
    for (size_t k = 0; k < leaves.size(); ++k)
      if (leaves[k]->is_reduce) { first_reduce = k; break; }
    if (init) {
      for (size_t k = leaves.size(); k-- > first_reduce + 1;) {
        if (leaves[k]->is_reduce) continue;
        init = make_loop(st, leaves[k], extents[k], init);
      }
    }

    for (size_t k = leaves.size(); k-- > 0;) {
      body = make_loop(st, leaves[k], extents[k], body);
      // Stages computed at this axis go first inside its loop.
      auto at = attached_.find(leaves[k].get());
      if (at != attached_.end()) {
        const auto* loop = body->as<For>();
        Stmt inner = loop->body;
        // Shared-memory tiles are filled first, then read; lower/gpu_barriers.cc puts the block's
        // barriers between and after.
        std::vector<Stmt> shared_fills;
        std::vector<Buffer> shared_buffers;
        for (const schedule::Stage* producer : at->second) {
          if (buffer_of(*producer)->scope != MemScope::kShared) continue;
          TF_ASSIGN_OR_RETURN(Stmt nest, build_stage(*producer));
          shared_fills.push_back(nest);
          shared_buffers.push_back(buffer_of(*producer));
        }
        if (!shared_fills.empty()) {
          shared_fills.push_back(inner);
          inner = block(shared_fills);
          for (const Buffer& buf : shared_buffers) inner = allocate(buf, inner);
        }
        for (auto pit = at->second.rbegin(); pit != at->second.rend(); ++pit) {
          if (buffer_of(**pit)->scope == MemScope::kShared) continue;
          TF_ASSIGN_OR_RETURN(Stmt nest, build_stage(**pit));
          inner = allocate(buffer_of(**pit), block({nest, inner}));
        }
        body = for_loop(loop->var, loop->min, loop->extent, loop->for_kind, inner, loop->thread_tag);
      }
      if (init && k == first_reduce) body = block({init, body});
    }
    if (init && first_reduce == leaves.size()) body = block({init, body});
    return body;
  }

  Stmt make_loop(const schedule::Stage& st, const te::IterVar& iv, const Expr& extent, Stmt body) {
    schedule::Annotation ann = st.annotation(iv);
    return for_loop(iv->var, int_imm(0), extent, ann.kind, std::move(body), ann.thread_tag);
  }

  const schedule::Schedule& sched_;
  const Bounds& bounds_;
  const std::unordered_map<const BufferNode*, PlannedBuffer>& realized_;
  const std::unordered_map<const te::IterVarNode*, std::vector<const schedule::Stage*>>& attached_;
};

}  // namespace

StatusOr<LoweredFunc> build_loop_nest(const schedule::Schedule& sched, const Bounds& bounds, const StoragePlan& plan,
                                      const std::vector<te::Tensor>& args, const std::string& name) {
  NestBuilder builder(sched, bounds, plan);
  TF_ASSIGN_OR_RETURN(Stmt body, builder.build_root());
  LoweredFunc f;
  f.name = name;
  for (const auto& t : args) f.args.push_back(t.buffer());
  f.body = std::move(body);
  return f;
}

}  // namespace tunefarm::lower
