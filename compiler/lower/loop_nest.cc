#include "compiler/lower/loop_nest.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include <fmt/format.h>

#include "compiler/ir/visitor.h"

namespace tunefarm::lower {

using namespace ir;

namespace {

// Below this many bytes an intermediate tensor at the root lives on the stack.
constexpr int64_t kStackLimitBytes = 64 * 1024;

struct Realized {
  Buffer buffer;
  std::vector<Expr> min;  // Region start per dimension, in the consumer's loop variables.
  // Buffer dimension i holds tensor dimension order[i]: a register tile is laid out in the
  // order of its loops, the innermost (vectorized) axis contiguous.
  std::vector<size_t> order;

  std::vector<Expr> permute(const std::vector<Expr>& idx) const {
    std::vector<Expr> out;
    for (size_t d : order) out.push_back(idx[d]);
    return out;
  }
};

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

// Rewrites loads of realized tensors into their buffers, rebased to the region's start.
class RebaseLoads : public IRMutator {
 public:
  explicit RebaseLoads(const std::unordered_map<const BufferNode*, Realized>& realized) : realized_(realized) {}

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
  const std::unordered_map<const BufferNode*, Realized>& realized_;
};

class NestBuilder {
 public:
  NestBuilder(const schedule::Schedule& sched, const Bounds& bounds) : sched_(sched), bounds_(bounds) {}

  Status realize(const std::vector<te::Tensor>& args) {
    std::unordered_set<const BufferNode*> arg_buffers;
    for (const auto& t : args) arg_buffers.insert(t.buffer().get());
    for (const auto& st : sched_.stages()) {
      const auto& op = st->op();
      bool is_arg = arg_buffers.count(op->buffer.get()) > 0;
      if (op->kind == te::OperationNode::Kind::kPlaceholder || sched_.is_output(op.get())) {
        if (!is_arg) return invalid_argument(fmt::format("tensor {} is an input or output but not a kernel argument", op->name));
        continue;
      }
      const StageBounds& sb = bounds_.stages.at(st.get());
      std::vector<int64_t> shape;
      for (size_t d = 0; d < op->axes.size(); ++d) {
        auto b = const_bounds(sb.root_extent[d], bounds_.ranges);
        if (!b) return internal_error(fmt::format("stage {}: region of unknown size", op->name));
        shape.push_back(std::max<int64_t>(1, b->hi));
      }
      MemScope scope = st->scope();
      if (scope == MemScope::kGlobal) {
        int64_t bytes = op->buffer->dtype.bytes();
        for (int64_t d : shape) bytes *= d;
        scope = st->attached() ? MemScope::kLocal : bytes <= kStackLimitBytes ? MemScope::kStack : MemScope::kWorkspace;
      }
      Realized r;
      r.order = st->attached() ? loop_order_layout(*st) : std::vector<size_t>();
      if (r.order.empty())
        for (size_t d = 0; d < op->axes.size(); ++d) r.order.push_back(d);
      std::vector<int64_t> laid_out;
      for (size_t d : r.order) laid_out.push_back(shape[d]);
      r.buffer = make_buffer(op->name, op->buffer->dtype, laid_out, scope);
      for (size_t d = 0; d < op->axes.size(); ++d) r.min.push_back(st->attached() ? sb.root_min[d] : int_imm(0));
      realized_[op->buffer.get()] = std::move(r);
      if (st->attached()) attached_[st->attach_iv().get()].push_back(st.get());
    }
    return Status();
  }

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
      Expr identity = red->op == ReduceOp::kSum ? float_imm(0.0) : float_imm(-std::numeric_limits<float>::infinity());
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
  std::unordered_map<const BufferNode*, Realized> realized_;
  std::unordered_map<const te::IterVarNode*, std::vector<const schedule::Stage*>> attached_;
};

}  // namespace

StatusOr<LoweredFunc> build_loop_nest(const schedule::Schedule& sched, const Bounds& bounds,
                                      const std::vector<te::Tensor>& args, const std::string& name) {
  NestBuilder builder(sched, bounds);
  TF_RETURN_IF_ERROR(builder.realize(args));
  TF_ASSIGN_OR_RETURN(Stmt body, builder.build_root());
  LoweredFunc f;
  f.name = name;
  for (const auto& t : args) f.args.push_back(t.buffer());
  f.body = std::move(body);
  return f;
}

}  // namespace tunefarm::lower
