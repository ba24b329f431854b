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
// Border iterations a guard split peels one by one at most (a padding of three rows or columns).
constexpr int64_t kMaxPeel = 3;
// The share of a loop's guarded reads in the padding from which its borders are peeled.
constexpr double kPeelShare = 0.1;

// The mins worth partitioning a loop for: the extents of unrolled and vectorized loops (tile
// tails: they need constant extents to be unrolled or vectorized without masks) and those in
// the stored values and addresses (padding clamps). Mins that only bound serial loops are left
// alone: splitting an outer loop for them would duplicate whole tiles.
//
// Also the integer comparisons in stored values: the guards of padded reads (select(h >= 0 &&
// h < H, in[clamped h], 0)), for `partition_guards`, with the ranges of the inner loops they
// depend on.
struct Candidates : IRVisitor {
  explicit Candidates(RangeMap outer) : ranges(std::move(outer)) {}

  std::vector<Expr> tile_extents;
  std::vector<Expr> in_values;
  std::vector<Expr> conditions;
  std::unordered_set<const VarNode*> inner_vars;
  std::unordered_set<const VarNode*> unrolled_vars;
  RangeMap ranges;  // The outer loops' and the constant-bounded inner loops'.

  void visit_for(const For* op) override {
    inner_vars.insert(op->var.get());
    if (op->for_kind == ForKind::kUnrolled) unrolled_vars.insert(op->var.get());
    if ((op->for_kind == ForKind::kUnrolled || op->for_kind == ForKind::kVectorized) && is_min(op->extent))
      tile_extents.push_back(op->extent);
    auto lo = const_bounds(op->min, ranges);
    auto ext = const_bounds(op->extent, ranges);
    if (lo && ext) ranges[op->var.get()] = {lo->lo, lo->hi + std::max<int64_t>(ext->hi, 1) - 1};
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
        const auto* c = x->as<Compare>();
        if (c && c->a->type.is_int() && !c->a->type.is_vector()) conditions.push_back(x);
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

// Whether every variable of `e` that belongs to an inner loop belongs to an unrolled one.
bool inner_vars_unrolled(const Expr& e, const Candidates& c) {
  bool all = true;
  post_order_visit(e, [&](const Expr& x) {
    if (auto* v = x->as<VarNode>(); v && c.inner_vars.count(v) && !c.unrolled_vars.count(v)) all = false;
  });
  return all;
}

// d = beta * v + rest, with beta a constant and rest free of v (checked at v = 0, 1, 2: a form
// that only looks linear there gives a partition point that is merely not useful, never a wrong
// program, as the parts keep every guard the simplifier cannot prove).
struct LinearIn {
  int64_t beta;
  Expr rest;
};
std::optional<LinearIn> linear_in(const Expr& d, const VarNode* v) {
  Expr d0 = simplify(substitute(d, {{v, int_imm(0)}}));
  Expr d1 = simplify(substitute(d, {{v, int_imm(1)}}));
  Expr d2 = simplify(substitute(d, {{v, int_imm(2)}}));
  // as_const_int points into its argument: the differences must outlive the pointers.
  Expr step1 = simplify(sub(d1, d0));
  Expr step2 = simplify(sub(d2, d1));
  const int64_t* beta = as_const_int(step1);
  const int64_t* beta2 = as_const_int(step2);
  if (!beta || !beta2 || *beta != *beta2 || uses_var(d0, v)) return std::nullopt;
  return LinearIn{*beta, d0};
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
  // `make()` with v known to lie in `range` (when there is one), and v's range as it was after.
  template <typename F>
  Stmt with_range(const VarNode* v, std::optional<ConstRange> range, F make) {
    auto it = ranges_.find(v);
    std::optional<ConstRange> saved = it == ranges_.end() ? std::nullopt : std::optional<ConstRange>(it->second);
    if (range) ranges_[v] = *range;
    Stmt out = make();
    if (saved) ranges_[v] = *saved;
    else ranges_.erase(v);
    return out;
  }

  // The loop's body, processed with the loop variable's range known.
  Stmt descend_body(const For* op) {
    auto lo = const_bounds(op->min, ranges_);
    auto ext = const_bounds(op->extent, ranges_);
    std::optional<ConstRange> range;
    if (lo && ext) range = ConstRange{lo->lo, lo->hi + std::max<int64_t>(ext->hi, 1) - 1};
    return with_range(op->var.get(), range, [&] { return mutate(op->body); });
  }

  // Processes the loop's body without partitioning the loop itself.
  Stmt descend(const Stmt& s, const For* op) {
    Stmt body = descend_body(op);
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
    auto linear = linear_in(sub(b->a, b->b), v);
    if (!linear || linear->beta <= 0) return std::nullopt;
    const Expr& d0 = linear->rest;
    if (uses_any(d0, inner)) return std::nullopt;
    if (!allow_symbolic && !as_const_int(d0)) return std::nullopt;
    auto q = floor_div(simplify(sub(int_imm(0), d0)), linear->beta);
    if (!q) return std::nullopt;
    return add(*q, int_imm(1));
  }

  std::optional<Stmt> partition(const For* op) {
    Candidates c(ranges_);
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
    if (mins.empty()) return partition_guards(op, c);

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

  // What the guards of a loop say about its variable v.
  struct Guards {
    int64_t lo, hi;                    // The iterations [lo, hi) where every guard holds.
    double failing = 0;                // The share of the guarded reads that fall outside.
    bool constant_after_unroll = true;  // Whether the guards depend on unrolled inner loops only.
  };

  // A guard e >= 0 (any comparison, rewritten so) with e = beta * v + rest holds for every value
  // of the inner loops once beta * v + min(rest) >= 0: it narrows [lo, hi). The comparisons that
  // do not have that form are skipped.
  void narrow(const Expr& cond, const VarNode* v, int64_t begin, int64_t end, const Candidates& c, Guards& g) {
    const auto* cmp = cond->as<Compare>();
    Expr d = sub(cmp->a, cmp->b);
    switch (cmp->op) {
      case CompareOp::kGE: break;
      case CompareOp::kGT: d = sub(d, int_imm(1)); break;
      case CompareOp::kLE: d = sub(int_imm(0), d); break;
      case CompareOp::kLT: d = sub(sub(int_imm(0), d), int_imm(1)); break;
      default: return;
    }
    auto linear = linear_in(d, v);
    if (!linear || linear->beta == 0) return;
    int64_t beta = linear->beta;
    auto rest = const_bounds(linear->rest, c.ranges);
    if (!rest) return;
    if (beta > 0) g.lo = std::max(g.lo, -floor_divide(rest->lo, beta));
    else g.hi = std::min(g.hi, floor_divide(rest->lo, -beta) + 1);
    g.constant_after_unroll = g.constant_after_unroll && inner_vars_unrolled(linear->rest, c);
    // e spans [e_min, e_max] over the loop and the inner loops; the values below 0 fail.
    double e_min = static_cast<double>(std::min(beta * begin, beta * (end - 1)) + rest->lo);
    double e_max = static_cast<double>(std::max(beta * begin, beta * (end - 1)) + rest->hi);
    if (e_min < 0) g.failing += (std::min(e_max, -1.0) - e_min + 1) / (e_max - e_min + 1);
  }

  // Padding: a loop whose body guards its reads (the rows or columns of a convolution's window
  // that fall outside the input) is split into the iterations where every guard holds, which
  // then read without them, and the borders.
  //
  // Where the guards depend only on unrolled loops and the padding is a good share of the reads
  // (a tenth or more: 3x3 windows on maps up to 18 wide) or the borders a quarter or more of the
  // iterations (a row of a few column tiles), the border iterations are peeled one by one: each
  // sees its guards as constants after unrolling, and the window positions in the padding drop
  // out (their products are zeros), which is the work oneDNN skips on small maps (a quarter of a
  // 3x3 window's taps on 5x5). A serial loop then becomes one loop a part; a
  // parallel one stays one loop (its border iterations would otherwise run on one thread each)
  // whose body branches to its part. Elsewhere the loop branches between the guard-free interior
  // and its body as it was: one more copy of the body, not one a border iteration (on a large
  // map those would multiply compile time for a few percent of the reads).
  std::optional<Stmt> partition_guards(const For* op, const Candidates& c) {
    bool parallel = op->for_kind == ForKind::kParallel;
    if ((op->for_kind != ForKind::kSerial && !parallel) || c.conditions.empty() || !split_guards_) return std::nullopt;
    const int64_t* mn = as_const_int(op->min);
    const int64_t* ext = as_const_int(op->extent);
    if (!mn || !ext) return std::nullopt;
    const VarNode* v = op->var.get();
    int64_t begin = *mn, end = *mn + *ext;
    if (std::optional<Expr> row = row_of_fused(op, c)) return partition_fused_guards(op, c, *row, begin, end);
    Guards g{begin, end};
    for (const auto& cond : c.conditions) narrow(cond, v, begin, end, c, g);
    int64_t lo = std::clamp(g.lo, begin, end), hi = std::clamp(g.hi, lo, end);
    if (lo == begin && hi == end) return std::nullopt;
    // Peeled, the border iterations run without guards; in the other form they keep them, which
    // costs where they are many of the iterations (a row of two column tiles: both are borders).
    int64_t borders = (lo - begin) + (end - hi);
    bool peel = g.constant_after_unroll && lo - begin <= kMaxPeel && end - hi <= kMaxPeel &&
                (g.failing >= kPeelShare || borders * 4 >= end - begin);
    if (!peel && lo == hi) return std::nullopt;

    // The body where v lies in [from, to), simplified knowing so and partitioned within.
    auto body_in = [&](int64_t from, int64_t to) {
      return with_range(v, ConstRange{from, to - 1}, [&] { return mutate(simplify(op->body, ranges_)); });
    };
    auto loop = [&](Stmt body) { return for_loop(op->var, op->min, op->extent, op->for_kind, body, op->thread_tag); };

    ++depth_;
    Stmt out;
    if (!peel) {
      Expr inside = logical_and(ge(op->var, int_imm(lo)), lt(op->var, int_imm(hi)));
      // The border keeps its guards, at every depth: only its tile tails are split.
      bool guards = split_guards_;
      split_guards_ = false;
      Stmt border = descend_body(op);
      split_guards_ = guards;
      out = loop(if_then_else(inside, body_in(lo, hi), border));
    } else {
      std::vector<std::pair<int64_t, int64_t>> parts;
      for (int64_t i = begin; i < lo; ++i) parts.emplace_back(i, i + 1);
      if (lo < hi) parts.emplace_back(lo, hi);
      for (int64_t i = hi; i < end; ++i) parts.emplace_back(i, i + 1);
      if (parallel) {
        // if (v < to_0) part_0 else if (v < to_1) part_1 ... else the last part.
        for (size_t k = parts.size(); k-- > 0;) {
          Stmt body = body_in(parts[k].first, parts[k].second);
          out = out ? if_then_else(lt(op->var, int_imm(parts[k].second)), body, out) : body;
        }
        out = loop(out);
      } else {
        // The interior first. Its iterations read every weight of the window, and a block's first
        // iteration is the one that streams them from memory: a border row first reads two
        // thirds of them and leaves the rest to come in pieces (ResNet-18's 512@5x5
        // convolutions in the model, weights from memory: 1.70 ms a border row first, 1.11 ms
        // the interior first, 1.37 ms with the padded copy). Parts of a loop may run in any
        // order: the loops lowered from compute stages are spatial (their iterations write
        // apart and read only other stages) or reductions (sums and maxima).
        std::stable_partition(parts.begin(), parts.end(), [&](const auto& part) { return part.first == lo && lo < hi; });
        std::vector<Stmt> loops;
        for (const auto& [from, to] : parts)
          loops.push_back(simplify(for_loop(op->var, int_imm(from), int_imm(to - from), op->for_kind, body_in(from, to),
                                            op->thread_tag), ranges_));
        out = block(std::move(loops));
      }
    }
    --depth_;
    return out;
  }

  // v % m where the guards read v only so: a loop fused of several (a parallel loop over channel
  // blocks x rows, ops::plain_schedule), whose guards are of the inner one's position, v % m.
  // Taken for v itself, v % m looks linear at v = 0, 1, 2 and gave a guard-free part of [1, 27)
  // of 12 x 28 iterations: every other row of a 3x3 max pooling read through its guards, 10x
  // ONNX Runtime's time.
  std::optional<Expr> row_of_fused(const For* op, const Candidates& c) {
    const VarNode* v = op->var.get();
    std::optional<Expr> row;
    for (const auto& cond : c.conditions)
      post_order_visit(cond, [&](const Expr& x) {
        const auto* b = x->as<Binary>();
        if (!row && b && b->op == BinaryOp::kMod && b->a->as<VarNode>() == v && as_const_int(b->b)) row = x;
      });
    if (!row) return std::nullopt;
    for (const auto& cond : c.conditions)
      if (uses_var(ReplaceExprs({{*row, int_imm(0)}}).mutate(cond), v)) return std::nullopt;
    return row;
  }

  // The loop branches, in each iteration, between its body with the guards of row = v % m taken
  // out (where they hold for every inner iteration) and its body as it was.
  std::optional<Stmt> partition_fused_guards(const For* op, const Candidates& c, const Expr& row, int64_t begin,
                                             int64_t end) {
    int64_t m = *as_const_int(row->as<Binary>()->b);
    Var u = make_var(op->var->name + ".row");
    // The outer loop's position, v / m, bound beside it: computed in the window's innermost loop
    // (a division by a constant, recomputed for every read) it cost a third of a pooling's time.
    Var q = make_var(op->var->name + ".outer");
    Expr outer = div(op->var, row->as<Binary>()->b);
    ReplaceExprs as_u({{row, u}, {outer, q}});
    Guards g{0, m};
    for (const auto& cond : c.conditions) narrow(as_u.mutate(cond), u.get(), 0, m, c, g);
    int64_t lo = std::clamp<int64_t>(g.lo, 0, m), hi = std::clamp<int64_t>(g.hi, lo, m);
    if ((lo == 0 && hi == m) || lo == hi) return std::nullopt;
    ++depth_;
    Stmt body = as_u.mutate(op->body);
    Stmt inside = with_range(op->var.get(), ConstRange{begin, end - 1}, [&] {
      return with_range(q.get(), ConstRange{begin / m, (end - 1) / m}, [&] {
        return with_range(u.get(), ConstRange{lo, hi - 1}, [&] { return mutate(simplify(body, ranges_)); });
      });
    });
    bool guards = split_guards_;
    split_guards_ = false;
    Stmt border = descend_body(op);
    split_guards_ = guards;
    --depth_;
    Expr in_range = logical_and(ge(row, int_imm(lo)), lt(row, int_imm(hi)));
    Stmt bound = let_stmt(q, outer, let_stmt(u, row, inside));
    return for_loop(op->var, op->min, op->extent, op->for_kind, if_then_else(in_range, bound, border), op->thread_tag);
  }

  RangeMap ranges_;
  int depth_ = 0;
  bool split_guards_ = true;
};

}  // namespace

Stmt loop_partition(const Stmt& s, const RangeMap& ranges) { return Partitioner(ranges).mutate(s); }

}  // namespace tunefarm::lower
