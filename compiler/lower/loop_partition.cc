#include "compiler/lower/loop_partition.h"

#include <optional>

#include "compiler/ir/visitor.h"

namespace tunefarm::lower {

using namespace ir;

namespace {

// Nested partitions multiply code (and compile time); past this depth the remaining mins stay
// as they are: the loops they bound run with variable extents, scalar, which is correct and
// only matters for the tails of tails.
constexpr int kMaxDepth = 3;

// The first iteration t in (lo, hi] where some min/max in `body` changes sides, if any.
std::optional<int64_t> find_split_point(const Stmt& body, const VarNode* v, int64_t lo, int64_t hi) {
  std::optional<int64_t> best;
  post_order_visit(body, [&](const Expr& e) {
    const auto* b = e->as<Binary>();
    if (!b || (b->op != BinaryOp::kMin && b->op != BinaryOp::kMax) || !e->type.is_int() || e->type.is_vector()) return;
    auto lin = as_linear_in(sub(b->a, b->b), v);
    if (!lin || lin->first == 0) return;
    auto side = [&](int64_t x) { return lin->first * x + lin->second <= 0; };
    bool first = side(lo);
    if (side(hi) == first) return;
    // Linear: one change of side; bisect for it.
    int64_t a = lo, z = hi;
    while (z - a > 1) {
      int64_t m = a + (z - a) / 2;
      (side(m) == first ? a : z) = m;
    }
    if (!best || z < *best) best = z;
  });
  return best;
}

class Partitioner : public IRMutator {
 public:
  explicit Partitioner(const RangeMap& ranges) : ranges_(ranges) {}

 protected:
  Stmt mutate_for(const Stmt& s, const For* op) override {
    const int64_t* mn = as_const_int(op->min);
    const int64_t* ext = as_const_int(op->extent);
    bool gpu = op->for_kind == ForKind::kGpuBlock || op->for_kind == ForKind::kGpuThread;
    if (mn && ext && *ext > 1 && !gpu && depth_ < kMaxDepth) {
      int64_t lo = *mn, hi = *mn + *ext - 1;
      if (auto t = find_split_point(op->body, op->var.get(), lo, hi)) {
        ++depth_;
        Stmt main = for_loop(op->var, int_imm(lo), int_imm(*t - lo), op->for_kind, op->body, op->thread_tag);
        Stmt tail = for_loop(op->var, int_imm(*t), int_imm(hi - *t + 1), op->for_kind, op->body, op->thread_tag);
        Stmt out = block({mutate(simplify(main, ranges_)), mutate(simplify(tail, ranges_))});
        --depth_;
        return out;
      }
    }
    bool had = ranges_.count(op->var.get());
    if (mn && ext) ranges_[op->var.get()] = {*mn, *mn + *ext - 1};
    Stmt out = IRMutator::mutate_for(s, op);
    if (!had) ranges_.erase(op->var.get());
    return out;
  }

 private:
  RangeMap ranges_;
  int depth_ = 0;
};

}  // namespace

Stmt loop_partition(const Stmt& s, const RangeMap& ranges) { return Partitioner(ranges).mutate(s); }

}  // namespace tunefarm::lower
