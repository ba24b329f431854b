#include "compiler/lower/loop_partition.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "compiler/ir/visitor.h"

namespace tunefarm::lower {

using namespace ir;

namespace {

// Nested partitions multiply code (and compile time); past this depth the remaining mins stay:
// their loops run with variable extents (masked vectors, scalar rows), which is correct.
constexpr int kMaxDepth = 3;

// The mins worth partitioning a loop for: the extents of unrolled and vectorized loops (tile
// tails: they need constant extents to be unrolled or vectorized without masks) and those in
// the stored values and addresses (padding clamps). Mins that only bound serial loops are left
// alone: splitting an outer loop for them would duplicate whole tiles.
struct Candidates : IRVisitor {
  std::vector<Expr> tile_extents;
  std::vector<Expr> in_values;
  std::unordered_set<const VarNode*> inner_vars;

  void visit_for(const For* op) override {
    inner_vars.insert(op->var.get());
    if ((op->for_kind == ForKind::kUnrolled || op->for_kind == ForKind::kVectorized) && is_min(op->extent))
      tile_extents.push_back(op->extent);
    visit(op->body);
  }
  void visit_let(const LetStmt* op) override {
    inner_vars.insert(op->var.get());
    IRVisitor::visit_let(op);
  }
  void visit_store(const Store* op) override {
    auto collect = [&](const Expr& e) {
      post_order_visit(e, [&](const Expr& x) {
        const auto* b = x->as<Binary>();
        if (b && (b->op == BinaryOp::kMin || b->op == BinaryOp::kMax) && x->type.is_int() && !x->type.is_vector())
          in_values.push_back(x);
      });
    };
    collect(op->value);
    for (const auto& i : op->indices) collect(i);
  }
  using IRVisitor::visit;

  static bool is_min(const Expr& e) {
    const auto* b = e->as<Binary>();
    return b && b->op == BinaryOp::kMin && e->type.is_int();
  }
};

bool uses_any(const Expr& e, const std::unordered_set<const VarNode*>& vars) {
  bool found = false;
  post_order_visit(e, [&](const Expr& x) {
    if (auto* v = x->as<VarNode>(); v && vars.count(v)) found = true;
  });
  return found;
}

// Replaces every occurrence (structurally) of the given expressions.
class ReplaceExprs : public IRMutator {
 public:
  explicit ReplaceExprs(std::vector<std::pair<Expr, Expr>> map) : map_(std::move(map)) {}
  Expr mutate(const Expr& e) override {
    for (const auto& [from, to] : map_)
      if (equal(e, from)) return to;
    return IRMutator::mutate(e);
  }
  using IRMutator::mutate;

 private:
  std::vector<std::pair<Expr, Expr>> map_;
};

// Unrolled loops become serial loops: for a partial tile, whose extents vary, compact code
// beats straight-line code that would duplicate the whole register tile.
class Deunroll : public IRMutator {
 protected:
  Stmt mutate_for(const Stmt& s, const For* op) override {
    Stmt body = mutate(op->body);
    if (op->for_kind != ForKind::kUnrolled && body == op->body) return s;
    ForKind kind = op->for_kind == ForKind::kUnrolled ? ForKind::kSerial : op->for_kind;
    return for_loop(op->var, op->min, op->extent, kind, body, op->thread_tag);
  }
};

class Partitioner : public IRMutator {
 public:
  explicit Partitioner(const RangeMap& ranges) : ranges_(ranges) {}

 protected:
  Stmt mutate_for(const Stmt& s, const For* op) override {
    bool gpu = op->for_kind == ForKind::kGpuBlock || op->for_kind == ForKind::kGpuThread;
    if (!gpu && depth_ < kMaxDepth) {
      if (auto parts = partition(op)) return *parts;
    }
    return descend(s, op);
  }

 private:
  // Processes the loop's body without partitioning the loop itself.
  Stmt descend(const Stmt& s, const For* op) {
    bool had = ranges_.count(op->var.get());
    auto lo = const_bounds(op->min, ranges_);
    auto ext = const_bounds(op->extent, ranges_);
    if (lo && ext) ranges_[op->var.get()] = {lo->lo, lo->hi + std::max<int64_t>(ext->hi, 1) - 1};
    Stmt body = mutate(op->body);
    if (!had) ranges_.erase(op->var.get());
    if (body == op->body) return s;
    return for_loop(op->var, op->min, op->extent, op->for_kind, body, op->thread_tag);
  }

  // floor(num / q) for q > 0, exact for negative numerators too (within num's known range).
  std::optional<Expr> floor_div(const Expr& num, int64_t q) {
    auto b = const_bounds(num, ranges_);
    if (!b) return std::nullopt;
    if (b->lo >= 0) return div(num, int_imm(q));
    int64_t shift = (-b->lo + q - 1) / q;
    return sub(div(add(num, int_imm(shift * q)), int_imm(q)), int_imm(shift));
  }

  // For min(a, b) with a - b = beta * v + rest (beta > 0, rest independent of v and of loops
  // inside): a holds while v < floor(-rest / beta) + 1.
  std::optional<Expr> threshold(const Expr& m, const VarNode* v, const std::unordered_set<const VarNode*>& inner,
                                bool allow_symbolic) {
    const auto* b = m->as<Binary>();
    if (b->op != BinaryOp::kMin) return std::nullopt;
    Expr d = sub(b->a, b->b);
    Expr d0 = simplify(substitute(d, {{v, int_imm(0)}}));
    Expr d1 = simplify(substitute(d, {{v, int_imm(1)}}));
    Expr d2 = simplify(substitute(d, {{v, int_imm(2)}}));
    // as_const_int points into its argument: the differences must outlive the pointers.
    Expr step1 = simplify(sub(d1, d0));
    Expr step2 = simplify(sub(d2, d1));
    const int64_t* beta = as_const_int(step1);
    const int64_t* beta2 = as_const_int(step2);
    if (!beta || !beta2 || *beta != *beta2 || *beta <= 0) return std::nullopt;
    if (uses_var(d0, v) || uses_any(d0, inner)) return std::nullopt;
    if (!allow_symbolic && !as_const_int(d0)) return std::nullopt;
    auto q = floor_div(simplify(sub(int_imm(0), d0)), *beta);
    if (!q) return std::nullopt;
    return add(*q, int_imm(1));
  }

  std::optional<Stmt> partition(const For* op) {
    Candidates c;
    c.visit(op->body);
    const VarNode* v = op->var.get();
    std::vector<Expr> mins;
    Expr t;
    auto consider = [&](const Expr& m, bool allow_symbolic) {
      for (const auto& seen : mins)
        if (equal(seen, m)) return;
      auto th = threshold(m, v, c.inner_vars, allow_symbolic);
      if (!th) return;
      mins.push_back(m);
      t = t ? min(t, *th) : *th;
    };
    for (const auto& m : c.tile_extents) consider(m, true);
    for (const auto& m : c.in_values) consider(m, false);
    if (mins.empty()) return std::nullopt;

    Expr end = add(op->min, op->extent);
    Expr tc = simplify(min(max(t, op->min), end), ranges_);
    // Nothing to gain when one side is provably empty.
    if (auto r = const_bounds(simplify(sub(tc, op->min), ranges_), ranges_); r && r->hi <= 0) return std::nullopt;
    if (auto r = const_bounds(simplify(sub(end, tc), ranges_), ranges_); r && r->hi <= 0) return std::nullopt;

    std::vector<std::pair<Expr, Expr>> known;
    for (const auto& m : mins) known.emplace_back(m, m->as<Binary>()->a);
    Stmt main_body = ReplaceExprs(known).mutate(op->body);
    Stmt main = for_loop(op->var, op->min, simplify(sub(tc, op->min), ranges_), op->for_kind, main_body, op->thread_tag);
    // A tail whose start depends on outer loops is the partial tile of every block shape.
    Stmt tail_body = as_const_int(tc) ? op->body : Deunroll().mutate(op->body);
    Stmt tail = for_loop(op->var, tc, simplify(sub(end, tc), ranges_), op->for_kind, tail_body, op->thread_tag);
    ++depth_;
    Stmt main_done = mutate(simplify(main, ranges_));
    // The tail keeps its mins (constant ranges may still resolve them); it is not split again
    // on the same point, only its inner loops are processed.
    Stmt tail_s = simplify(tail, ranges_);
    Stmt tail_done = tail_s && tail_s->as<For>() ? descend(tail_s, tail_s->as<For>()) : mutate(tail_s);
    --depth_;
    return block({main_done, tail_done});
  }

  RangeMap ranges_;
  int depth_ = 0;
};

}  // namespace

Stmt loop_partition(const Stmt& s, const RangeMap& ranges) { return Partitioner(ranges).mutate(s); }

}  // namespace tunefarm::lower
