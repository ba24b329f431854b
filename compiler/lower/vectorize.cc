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
  Widen(const VarNode* var, Expr min, int lanes) : var_(var), min_(std::move(min)), lanes_(lanes) {}
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
    return load(op->buffer, {idx});
  }
  Expr mutate_reduce(const Expr& e, const Reduce*) override {
    ok_ = false;
    return e;
  }
  Stmt mutate_store(const Stmt& s, const Store* op) override {
    Expr v = mutate(op->value);
    Expr idx = mutate(op->indices[0]);
    if (v == op->value && idx == op->indices[0]) return s;
    return store(op->buffer, widen(v, lanes_), {widen(idx, lanes_)});
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
  bool ok_ = true;
};

class Vectorizer : public IRMutator {
 protected:
  Stmt mutate_for(const Stmt& s, const For* op) override {
    Stmt body = mutate(op->body);
    if (op->for_kind == ForKind::kVectorized) {
      const int64_t* ext = as_const_int(op->extent);
      if (ext && *ext > 1 && *ext <= 256) {
        // Chunks of power-of-two widths up to the native one (28 = 16 + 8 + 4): wider vectors
        // only make LLVM split them again, and odd widths legalize poorly (a 12-lane gather is
        // scalarized).
        std::vector<Stmt> chunks;
        bool ok = true;
        int lanes = 0;
        for (int64_t start = 0; start < *ext && ok; start += lanes) {
          lanes = 1;
          while (lanes * 2 <= std::min<int64_t>(kMaxLanes, *ext - start)) lanes *= 2;
          Widen w(op->var.get(), add(op->min, int_imm(start)), lanes);
          chunks.push_back(lanes == 1 ? substitute(body, {{op->var.get(), add(op->min, int_imm(start))}}) : w.mutate(body));
          ok = w.ok();
        }
        if (ok) return block(std::move(chunks));
      }
      return for_loop(op->var, op->min, op->extent, ForKind::kSerial, body, op->thread_tag);
    }
    if (body == op->body) return s;
    return for_loop(op->var, op->min, op->extent, op->for_kind, body, op->thread_tag);
  }
};

}  // namespace

Stmt vectorize_loops(const Stmt& s) { return Vectorizer().mutate(s); }

}  // namespace tunefarm::lower
