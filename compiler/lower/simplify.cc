#include "compiler/lower/simplify.h"

#include <algorithm>
#include <limits>

#include "compiler/ir/visitor.h"

namespace tunefarm::lower {

using namespace ir;

namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

// sum(coeff * atom) + constant; atoms are variables or expressions that are not sums.
struct Linear {
  std::vector<std::pair<Expr, int64_t>> terms;
  int64_t constant = 0;

  void add_term(const Expr& atom, int64_t coeff) {
    if (coeff == 0) return;
    for (auto& [a, c] : terms) {
      if (equal(a, atom)) {
        c += coeff;
        return;
      }
    }
    terms.emplace_back(atom, coeff);
  }
  void add(const Linear& o, int64_t scale) {
    for (const auto& [a, c] : o.terms) add_term(a, c * scale);
    constant += o.constant * scale;
  }
  void drop_zeros() {
    terms.erase(std::remove_if(terms.begin(), terms.end(), [](const auto& t) { return t.second == 0; }), terms.end());
  }
};

Linear to_linear(const Expr& e) {
  Linear out;
  if (const int64_t* c = as_const_int(e)) {
    out.constant = *c;
    return out;
  }
  if (const auto* b = e->as<Binary>(); b && e->type.is_int() && !e->type.is_vector()) {
    if (b->op == BinaryOp::kAdd || b->op == BinaryOp::kSub) {
      out = to_linear(b->a);
      out.add(to_linear(b->b), b->op == BinaryOp::kAdd ? 1 : -1);
      out.drop_zeros();
      return out;
    }
    if (b->op == BinaryOp::kMul) {
      if (const int64_t* c = as_const_int(b->b)) {
        out.add(to_linear(b->a), *c);
        out.drop_zeros();
        return out;
      }
      if (const int64_t* c = as_const_int(b->a)) {
        out.add(to_linear(b->b), *c);
        out.drop_zeros();
        return out;
      }
    }
  }
  out.add_term(e, 1);
  return out;
}

// (x / c) * (c * m) + (x % c) * m is x * m (division and remainder truncate alike: x == c * (x / c)
// + x % c for any x): an index through a fused loop variable split back into its axes (a softmax's
// heads and rows as one parallel loop) is the variable again, computed once rather than divided
// and multiplied back in every inner iteration.
void merge_div_mod(Linear& l) {
  auto div_mod = [](const Expr& e, BinaryOp op, int64_t& c) -> const Binary* {
    const auto* b = e->as<Binary>();
    if (!b || b->op != op) return nullptr;
    const int64_t* k = as_const_int(b->b);
    if (!k || *k <= 0) return nullptr;
    c = *k;
    return b;
  };
  for (bool merged = true; merged;) {
    merged = false;
    for (size_t i = 0; i < l.terms.size() && !merged; ++i) {
      int64_t c = 0;
      const Binary* d = div_mod(l.terms[i].first, BinaryOp::kDiv, c);
      if (!d) continue;
      for (size_t j = 0; j < l.terms.size() && !merged; ++j) {
        int64_t cm = 0;
        const Binary* m = div_mod(l.terms[j].first, BinaryOp::kMod, cm);
        if (!m || cm != c || l.terms[i].second != c * l.terms[j].second || !equal(d->a, m->a)) continue;
        Expr x = d->a;
        int64_t scale = l.terms[j].second;
        l.terms.erase(l.terms.begin() + static_cast<std::ptrdiff_t>(std::max(i, j)));
        l.terms.erase(l.terms.begin() + static_cast<std::ptrdiff_t>(std::min(i, j)));
        l.add(to_linear(x), scale);
        l.drop_zeros();
        merged = true;
      }
    }
  }
}

// Positive terms, then a positive constant, then what is subtracted: a + b + 3 - c - 1.
Expr from_linear(const Linear& l) {
  Expr out;
  auto term = [](const Expr& a, int64_t c) { return c == 1 ? a : mul(a, int_imm(c)); };
  for (const auto& [a, c] : l.terms)
    if (c > 0) out = out ? std::make_shared<Binary>(BinaryOp::kAdd, out, term(a, c)) : term(a, c);
  if (l.constant > 0) out = out ? std::make_shared<Binary>(BinaryOp::kAdd, out, int_imm(l.constant)) : int_imm(l.constant);
  for (const auto& [a, c] : l.terms)
    if (c < 0) out = out ? std::make_shared<Binary>(BinaryOp::kSub, out, term(a, -c)) : term(a, c);
  if (!out) return int_imm(l.constant);
  if (l.constant < 0) out = std::make_shared<Binary>(BinaryOp::kSub, out, int_imm(-l.constant));
  return out;
}

bool is_float_zero(const Expr& e) {
  if (const auto* b = e->as<Broadcast>()) return is_float_zero(b->value);
  const auto* f = e->as<FloatImm>();
  return f && f->value == 0.0;
}

bool is_empty(const Stmt& s) {
  const auto* b = s->as<Block>();
  return b && b->stmts.empty();
}

int64_t sat_mul(int64_t a, int64_t b) {
  __int128 r = static_cast<__int128>(a) * b;
  if (r > kInf) return kInf;
  if (r < -kInf) return -kInf;
  return static_cast<int64_t>(r);
}
int64_t sat_add(int64_t a, int64_t b) { return std::clamp<int64_t>(a + b, -kInf, kInf); }

class Simplifier : public IRMutator {
 public:
  explicit Simplifier(const RangeMap& ranges) : ranges_(ranges) {}

  Expr mutate(const Expr& e) override { return IRMutator::mutate(e); }
  Stmt mutate(const Stmt& s) override { return IRMutator::mutate(s); }

 protected:
  // A variable known to take a single value is that value.
  Expr mutate_var(const Expr& e) override {
    auto it = ranges_.find(static_cast<const VarNode*>(e.get()));
    if (it != ranges_.end() && it->second.lo == it->second.hi && e->type.is_int()) return int_imm(it->second.lo);
    return e;
  }

  Expr mutate_binary(const Expr& e, const Binary* op) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (!e->type.is_int() || e->type.is_vector()) {
      if (e->type.is_float()) {
        auto* fa = a->as<FloatImm>();
        auto* fb = b->as<FloatImm>();
        if (fa && fb) {
          switch (op->op) {
            case BinaryOp::kAdd: return float_imm(fa->value + fb->value, e->type);
            case BinaryOp::kSub: return float_imm(fa->value - fb->value, e->type);
            case BinaryOp::kMul: return float_imm(fa->value * fb->value, e->type);
            case BinaryOp::kMin: return float_imm(std::min(fa->value, fb->value), e->type);
            case BinaryOp::kMax: return float_imm(std::max(fa->value, fb->value), e->type);
            default: break;
          }
        }
        // A product with a literal zero is zero, whatever the other factor: such zeros are
        // padding (a guarded read outside the input, once loop partitioning made its guard
        // constant), which the operators' references skip rather than multiply; so an
        // accumulation of a padding tap becomes `acc = acc` and drops out.
        if (op->op == BinaryOp::kMul && (is_float_zero(a) || is_float_zero(b)))
          return e->type.is_vector() ? broadcast(float_imm(0, e->type.element()), e->type.lanes) : float_imm(0, e->type);
        if (op->op == BinaryOp::kAdd && is_float_zero(b)) return a;
        if (op->op == BinaryOp::kAdd && is_float_zero(a)) return b;
        if (op->op == BinaryOp::kSub && is_float_zero(b)) return a;
      }
      return (a == op->a && b == op->b) ? e : binary(op->op, a, b);
    }
    switch (op->op) {
      case BinaryOp::kAdd: case BinaryOp::kSub: case BinaryOp::kMul: {
        Expr rebuilt = (a == op->a && b == op->b) ? e : binary(op->op, a, b);
        if (as_const_int(rebuilt)) return rebuilt;
        Linear l = to_linear(rebuilt);
        merge_div_mod(l);
        return from_linear(l);
      }
      case BinaryOp::kDiv: return simplify_div(a, b);
      case BinaryOp::kMod: return simplify_mod(a, b);
      case BinaryOp::kMin: case BinaryOp::kMax: return simplify_minmax(op->op, a, b);
    }
    return e;
  }

  Expr mutate_compare(const Expr& e, const Compare* op) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a->type.is_int() && !a->type.is_vector()) {
      Linear d = to_linear(a);
      d.add(to_linear(b), -1);
      d.drop_zeros();
      if (auto r = bounds(from_linear(d))) {
        switch (op->op) {
          case CompareOp::kLT: if (r->hi < 0) return bool_imm(true); if (r->lo >= 0) return bool_imm(false); break;
          case CompareOp::kLE: if (r->hi <= 0) return bool_imm(true); if (r->lo > 0) return bool_imm(false); break;
          case CompareOp::kGT: if (r->lo > 0) return bool_imm(true); if (r->hi <= 0) return bool_imm(false); break;
          case CompareOp::kGE: if (r->lo >= 0) return bool_imm(true); if (r->hi < 0) return bool_imm(false); break;
          case CompareOp::kEQ: if (r->lo == 0 && r->hi == 0) return bool_imm(true); if (r->lo > 0 || r->hi < 0) return bool_imm(false); break;
          case CompareOp::kNE: if (r->lo == 0 && r->hi == 0) return bool_imm(false); if (r->lo > 0 || r->hi < 0) return bool_imm(true); break;
        }
      }
    }
    return (a == op->a && b == op->b) ? e : compare(op->op, a, b);
  }

  // Storing what a location holds is no store (an accumulation whose term folded to zero).
  Stmt mutate_store(const Stmt& s, const Store* op) override {
    Stmt out = IRMutator::mutate_store(s, op);
    const auto* st = out->as<Store>();
    const auto* ld = st ? st->value->as<Load>() : nullptr;
    if (!ld || ld->buffer != st->buffer || st->predicate || ld->predicate || ld->indices.size() != st->indices.size())
      return out;
    for (size_t i = 0; i < st->indices.size(); ++i)
      if (!equal(ld->indices[i], st->indices[i])) return out;
    return block({});
  }

  Stmt mutate_for(const Stmt& s, const For* op) override {
    Expr mn = mutate(op->min), ext = mutate(op->extent);
    const int64_t* cext = as_const_int(ext);
    if (cext && *cext <= 0) return block({});
    bool gpu = op->for_kind == ForKind::kGpuBlock || op->for_kind == ForKind::kGpuThread;
    if (cext && *cext == 1 && !gpu) return mutate(substitute(op->body, {{op->var.get(), mn}}));
    auto lo = bounds(mn);
    auto ext_r = bounds(ext);
    bool had = ranges_.count(op->var.get());
    if (lo && ext_r) ranges_[op->var.get()] = {lo->lo, sat_add(lo->hi, ext_r->hi - 1)};
    Stmt body = mutate(op->body);
    if (!had) ranges_.erase(op->var.get());
    if (is_empty(body)) return body;
    if (mn == op->min && ext == op->extent && body == op->body) return s;
    return for_loop(op->var, mn, ext, op->for_kind, body, op->thread_tag);
  }

  Stmt mutate_let(const Stmt& s, const LetStmt* op) override {
    Expr v = mutate(op->value);
    if (as_const_int(v) || v->as<VarNode>()) return mutate(substitute(op->body, {{op->var.get(), v}}));
    bool had = ranges_.count(op->var.get());
    if (auto r = bounds(v)) ranges_[op->var.get()] = *r;
    Stmt body = mutate(op->body);
    if (!had) ranges_.erase(op->var.get());
    if (v == op->value && body == op->body) return s;
    return let_stmt(op->var, v, body);
  }

  Stmt mutate_if(const Stmt& s, const IfThenElse* op) override {
    Expr c = mutate(op->cond);
    if (const auto* imm = c->as<IntImm>()) return imm->value ? mutate(op->then_case) : mutate(op->else_case);
    Stmt t = mutate(op->then_case), f = mutate(op->else_case);
    if (c == op->cond && t == op->then_case && f == op->else_case) return s;
    return if_then_else(c, t, f);
  }

 private:
  std::optional<ConstRange> bounds(const Expr& e) { return const_bounds(e, ranges_); }

  Expr simplify_div(const Expr& a, const Expr& b) {
    const int64_t* c = as_const_int(b);
    if (!c || *c <= 0) return div(a, b);
    if (*c == 1) return a;
    auto ra = bounds(a);
    if (ra && ra->lo >= 0 && ra->hi < *c) return int_imm(0);
    if (!ra || ra->lo < 0) return div(a, b);
    // (q*c + r)/c == q + r/c for a non-negative remainder part r.
    Linear l = to_linear(a), q, r;
    for (const auto& [atom, coeff] : l.terms) {
      if (coeff % *c == 0) q.add_term(atom, coeff / *c);
      else r.add_term(atom, coeff);
    }
    q.constant = floor_divide(l.constant, *c);
    r.constant = l.constant - q.constant * *c;
    Expr rest = from_linear(r);
    auto rr = bounds(rest);
    if (!rr || rr->lo < 0 || q.terms.empty()) return div(a, b);
    Linear out = q;
    // r/c is a constant where r's bounds lie within one multiple of c: the last index of a split
    // with a tail, (o*c + min(c, E - o*c) - 1)/c, is o.
    if (rr->lo / *c == rr->hi / *c) out.constant += rr->lo / *c;
    else out.add_term(div(rest, b), 1);
    return from_linear(out);
  }

  Expr simplify_mod(const Expr& a, const Expr& b) {
    const int64_t* c = as_const_int(b);
    if (!c || *c <= 0) return mod(a, b);
    if (*c == 1) return int_imm(0);
    auto ra = bounds(a);
    if (ra && ra->lo >= 0 && ra->hi < *c) return a;
    if (!ra || ra->lo < 0) return mod(a, b);
    Linear l = to_linear(a), r;
    for (const auto& [atom, coeff] : l.terms)
      if (coeff % *c != 0) r.add_term(atom, coeff);
    r.constant = l.constant - floor_divide(l.constant, *c) * *c;
    Expr rest = from_linear(r);
    auto rr = bounds(rest);
    if (!rr || rr->lo < 0) return mod(a, b);
    if (rr->hi < *c) return rest;
    return mod(rest, b);
  }

  // Whether the linear form is <= 0 for every value of its variables: by constant ranges, or by
  // bounding a min(p, q) term (positive coefficient) by one of its operands, which is what tile
  // extents nested in other tiles' extents need (min(64, M - 64 io) - (M - 64 io) <= 0).
  bool provably_nonpositive(const Linear& d, int depth = 0) {
    if (auto r = bounds(from_linear(d)); r && r->hi <= 0) return true;
    if (depth >= 2) return false;
    for (size_t t = 0; t < d.terms.size(); ++t) {
      const auto* m = d.terms[t].first->as<Binary>();
      int64_t c = d.terms[t].second;
      if (!m || !((m->op == BinaryOp::kMin && c > 0) || (m->op == BinaryOp::kMax && c < 0))) continue;
      for (const Expr& operand : {m->a, m->b}) {
        Linear e;
        for (size_t u = 0; u < d.terms.size(); ++u)
          if (u != t) e.add_term(d.terms[u].first, d.terms[u].second);
        e.constant = d.constant;
        e.add(to_linear(operand), c);
        e.drop_zeros();
        if (provably_nonpositive(e, depth + 1)) return true;
      }
    }
    return false;
  }

  Expr simplify_minmax(BinaryOp op, const Expr& a, const Expr& b) {
    if (equal(a, b)) return a;
    Linear d = to_linear(a);
    d.add(to_linear(b), -1);
    d.drop_zeros();
    bool is_min = op == BinaryOp::kMin;
    if (provably_nonpositive(d)) return is_min ? a : b;  // a <= b
    Linear neg;
    neg.add(d, -1);
    if (provably_nonpositive(neg)) return is_min ? b : a;  // a >= b
    return binary(op, a, b);
  }

  RangeMap ranges_;
};

}  // namespace

int64_t floor_divide(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

std::optional<ConstRange> const_bounds(const Expr& e, const RangeMap& ranges) {
  if (!e->type.is_int() && !e->type.is_bool()) return std::nullopt;
  if (const auto* imm = e->as<IntImm>()) return ConstRange{imm->value, imm->value};
  if (const auto* v = e->as<VarNode>()) {
    auto it = ranges.find(v);
    if (it == ranges.end()) return std::nullopt;
    return it->second;
  }
  if (const auto* r = e->as<Ramp>()) {
    auto base = const_bounds(r->base, ranges), stride = const_bounds(r->stride, ranges);
    if (!base || !stride) return std::nullopt;
    int64_t span = sat_mul(r->lanes - 1, stride->hi);
    return ConstRange{std::min(base->lo, sat_add(base->lo, sat_mul(r->lanes - 1, stride->lo))), std::max(base->hi, sat_add(base->hi, span))};
  }
  if (const auto* b = e->as<Broadcast>()) return const_bounds(b->value, ranges);
  if (const auto* s = e->as<Select>()) {
    auto t = const_bounds(s->t, ranges), f = const_bounds(s->f, ranges);
    if (!t || !f) return std::nullopt;
    return ConstRange{std::min(t->lo, f->lo), std::max(t->hi, f->hi)};
  }
  const auto* b = e->as<Binary>();
  if (!b) return std::nullopt;
  auto x = const_bounds(b->a, ranges);
  auto y = const_bounds(b->b, ranges);
  if (!x || !y) {
    // min/max stay bounded on one side even when the other operand is unknown.
    if (b->op == BinaryOp::kMin && (x || y)) {
      int64_t hi = x ? x->hi : y->hi;
      return ConstRange{-kInf, hi};
    }
    return std::nullopt;
  }
  switch (b->op) {
    case BinaryOp::kAdd: return ConstRange{sat_add(x->lo, y->lo), sat_add(x->hi, y->hi)};
    case BinaryOp::kSub: return ConstRange{sat_add(x->lo, -y->hi), sat_add(x->hi, -y->lo)};
    case BinaryOp::kMul: {
      int64_t c[4] = {sat_mul(x->lo, y->lo), sat_mul(x->lo, y->hi), sat_mul(x->hi, y->lo), sat_mul(x->hi, y->hi)};
      return ConstRange{*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
    }
    case BinaryOp::kDiv:
      if (y->lo == y->hi && y->lo > 0) return ConstRange{x->lo / y->lo, x->hi / y->lo};
      return std::nullopt;
    case BinaryOp::kMod:
      if (y->lo == y->hi && y->lo > 0 && x->lo >= 0) {
        if (x->hi < y->lo) return x;
        return ConstRange{0, y->lo - 1};
      }
      return std::nullopt;
    case BinaryOp::kMin: return ConstRange{std::min(x->lo, y->lo), std::min(x->hi, y->hi)};
    case BinaryOp::kMax: return ConstRange{std::max(x->lo, y->lo), std::max(x->hi, y->hi)};
  }
  return std::nullopt;
}

Expr simplify(const Expr& e, const RangeMap& ranges) { return Simplifier(ranges).mutate(e); }
Stmt simplify(const Stmt& s, const RangeMap& ranges) { return Simplifier(ranges).mutate(s); }

std::optional<std::pair<int64_t, int64_t>> as_linear_in(const Expr& e, const VarNode* v) {
  Linear l = to_linear(simplify(e));
  int64_t coeff = 0;
  for (const auto& [atom, c] : l.terms) {
    if (atom.get() != v) return std::nullopt;
    coeff += c;
  }
  return std::make_pair(coeff, l.constant);
}

}  // namespace tunefarm::lower
