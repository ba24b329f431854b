#include "compiler/lower/vectorize.h"

#include <algorithm>

#include "compiler/ir/visitor.h"
#include "compiler/lower/simplify.h"

namespace tunefarm::lower {

using namespace ir;

namespace {

// 16 floats fill one AVX-512 register; narrower targets split them in LLVM.
constexpr int64_t kMaxLanes = 16;

Expr widen(const Expr& e, int lanes) { return e->type.lanes == lanes ? e : broadcast(e, lanes); }

// Replaces one variable by a ramp and propagates the lanes through the expression.
class Widen : public IRMutator {
 public:
  // `predicate` (may be null) masks the lanes past a variable extent.
  Widen(const VarNode* var, Expr min, int lanes, Expr predicate = nullptr)
      : var_(var), min_(std::move(min)), lanes_(lanes), predicate_(std::move(predicate)) {}
  bool ok() const { return ok_; }

 protected:
  Expr mutate_var(const Expr& e) override {
    if (e.get() == var_) return ramp(min_, int_imm(1), lanes_);
    return e;
  }
  Expr mutate_binary(const Expr& e, const Binary* op) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a == op->a && b == op->b) return e;
    // Keep index arithmetic affine: ramp +- scalar, ramp * constant stay ramps.
    const auto* ra = a->as<Ramp>();
    const auto* rb = b->as<Ramp>();
    bool sa = !a->type.is_vector(), sb = !b->type.is_vector();
    if (ra && sb && (op->op == BinaryOp::kAdd || op->op == BinaryOp::kSub))
      return ramp(binary(op->op, ra->base, b), ra->stride, ra->lanes);
    if (rb && sa && op->op == BinaryOp::kAdd) return ramp(add(a, rb->base), rb->stride, rb->lanes);
    if (ra && sb && op->op == BinaryOp::kMul && as_const_int(b)) return ramp(mul(ra->base, b), mul(ra->stride, b), ra->lanes);
    if (rb && sa && op->op == BinaryOp::kMul && as_const_int(a)) return ramp(mul(rb->base, a), mul(rb->stride, a), rb->lanes);
    if (ra && rb && (op->op == BinaryOp::kAdd || op->op == BinaryOp::kSub))
      return ramp(binary(op->op, ra->base, rb->base), binary(op->op, ra->stride, rb->stride), ra->lanes);
    return binary(op->op, widen(a, lanes_), widen(b, lanes_));
  }
  Expr mutate_compare(const Expr& e, const Compare* op) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a == op->a && b == op->b) return e;
    return compare(op->op, widen(a, lanes_), widen(b, lanes_));
  }
  Expr mutate_logical(const Expr& e, const Logical* op) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a == op->a && b == op->b) return e;
    a = widen(a, lanes_);
    b = widen(b, lanes_);
    if (op->op == LogicalOp::kAnd) return logical_and(a, b);
    return std::make_shared<Logical>(op->op, a, b);
  }
  Expr mutate_select(const Expr& e, const Select* op) override {
    Expr c = mutate(op->cond), t = mutate(op->t), f = mutate(op->f);
    if (c == op->cond && t == op->t && f == op->f) return e;
    return select(widen(c, lanes_), widen(t, lanes_), widen(f, lanes_));
  }
  Expr mutate_load(const Expr& e, const Load* op) override {
    Expr idx = mutate(op->indices[0]);
    if (idx == op->indices[0]) return e;
    return load(op->buffer, {idx}, predicate_);
  }
  Expr mutate_reduce(const Expr& e, const Reduce*) override {
    ok_ = false;
    return e;
  }
  Stmt mutate_store(const Stmt& s, const Store* op) override {
    Expr v = mutate(op->value);
    Expr idx = mutate(op->indices[0]);
    if (v == op->value && idx == op->indices[0]) return s;
    // Every lane writing the same element is a reduction over the loop: not vectorizable here.
    if (!idx->type.is_vector()) ok_ = false;
    return store(op->buffer, widen(v, lanes_), {widen(idx, lanes_)}, predicate_);
  }
  Stmt mutate_for(const Stmt& s, const For*) override {
    ok_ = false;
    return s;
  }
  Stmt mutate_let(const Stmt& s, const LetStmt* op) override {
    Expr v = mutate(op->value);
    if (v != op->value) ok_ = false;  // A vector let would need vector variables.
    return IRMutator::mutate_let(s, op);
  }
  Stmt mutate_if(const Stmt& s, const IfThenElse* op) override {
    if (uses_var(op->cond, var_)) ok_ = false;
    return IRMutator::mutate_if(s, op);
  }
  Stmt mutate_allocate(const Stmt& s, const Allocate*) override {
    ok_ = false;
    return s;
  }

 private:
  const VarNode* var_;
  Expr min_;
  int lanes_;
  Expr predicate_;
  bool ok_ = true;
};

class Vectorizer : public IRMutator {
 protected:
  Stmt mutate_for(const Stmt& s, const For* op) override {
    auto lo = const_bounds(op->min, ranges_);
    auto ext_bounds = const_bounds(op->extent, ranges_);
    bool had = ranges_.count(op->var.get());
    if (lo && ext_bounds) ranges_[op->var.get()] = {lo->lo, lo->hi + std::max<int64_t>(ext_bounds->hi, 1) - 1};
    Stmt body = mutate(op->body);
    if (!had) ranges_.erase(op->var.get());
    if (op->for_kind == ForKind::kVectorized) {
      // A variable extent (the tail of a tile) runs as vectors of its bound with the lanes past
      // the extent masked off.
      const int64_t* ext = as_const_int(op->extent);
      int64_t width = ext ? *ext : (ext_bounds ? ext_bounds->hi : 0);
      if (width > 1 && width <= 256) {
        if (Stmt v = widen_loop(op, body, width, ext == nullptr)) return v;
      }
      return for_loop(op->var, op->min, op->extent, ForKind::kSerial, body, op->thread_tag);
    }
    if (body == op->body) return s;
    return for_loop(op->var, op->min, op->extent, op->for_kind, body, op->thread_tag);
  }

 private:
  // Chunks of power-of-two widths up to the native one (28 = 16 + 8 + 4): wider vectors only
  // make LLVM split them again, and odd widths legalize poorly (a 12-lane gather is scalarized).
  Stmt widen_loop(const For* op, const Stmt& body, int64_t width, bool masked) {
    std::vector<Stmt> chunks;
    int lanes = 0;
    for (int64_t start = 0; start < width; start += lanes) {
      lanes = 1;
      while (lanes * 2 <= std::min<int64_t>(kMaxLanes, width - start)) lanes *= 2;
      Expr first = add(op->min, int_imm(start));
      if (lanes == 1) {
        Stmt scalar = substitute(body, {{op->var.get(), first}});
        chunks.push_back(masked ? if_then_else(lt(int_imm(start), op->extent), scalar) : scalar);
        continue;
      }
      Expr predicate = masked ? lt(ramp(int_imm(start), int_imm(1), lanes), broadcast(op->extent, lanes)) : nullptr;
      Widen w(op->var.get(), first, lanes, predicate);
      Stmt chunk = w.mutate(body);
      if (!w.ok()) return nullptr;
      chunks.push_back(chunk);
    }
    return block(std::move(chunks));
  }

  RangeMap ranges_;
};

}  // namespace

Stmt vectorize_loops(const Stmt& s) { return Vectorizer().mutate(s); }

}  // namespace tunefarm::lower
