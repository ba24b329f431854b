#include "compiler/lower/interval.h"

#include "compiler/ir/visitor.h"

namespace tunefarm::lower {

using namespace ir;

std::optional<Interval> eval_interval(const Expr& e, const IntervalMap& vars) {
  if (e->as<IntImm>()) return Interval::point(e);
  if (const auto* v = e->as<VarNode>()) {
    auto it = vars.find(v);
    return it == vars.end() ? Interval::point(e) : it->second;
  }
  const auto* b = e->as<Binary>();
  if (!b) return std::nullopt;
  auto x = eval_interval(b->a, vars);
  auto y = eval_interval(b->b, vars);
  if (!x || !y) return std::nullopt;
  switch (b->op) {
    case BinaryOp::kAdd: return Interval{add(x->min, y->min), add(x->max, y->max)};
    case BinaryOp::kSub: return Interval{sub(x->min, y->max), sub(x->max, y->min)};
    case BinaryOp::kMul: {
      const int64_t* cy = as_const_int(b->b);
      const int64_t* cx = as_const_int(b->a);
      if (cy) return *cy >= 0 ? Interval{mul(x->min, b->b), mul(x->max, b->b)} : Interval{mul(x->max, b->b), mul(x->min, b->b)};
      if (cx) return *cx >= 0 ? Interval{mul(b->a, y->min), mul(b->a, y->max)} : Interval{mul(b->a, y->max), mul(b->a, y->min)};
      return std::nullopt;
    }
    case BinaryOp::kDiv: {
      const int64_t* c = as_const_int(b->b);
      if (!c || *c <= 0) return std::nullopt;
      return Interval{div(x->min, b->b), div(x->max, b->b)};
    }
    case BinaryOp::kMod: {
      const int64_t* c = as_const_int(b->b);
      if (!c || *c <= 0) return std::nullopt;
      // A single value (e.g. a fused index at fixed block and thread) stays one: the element a
      // GPU thread computes is one element, not a whole row.
      if (equal(x->min, x->max)) return Interval::point(mod(x->min, b->b));
      return Interval{int_imm(0), int_imm(*c - 1)};
    }
    case BinaryOp::kMin: return Interval{min(x->min, y->min), min(x->max, y->max)};
    case BinaryOp::kMax: return Interval{max(x->min, y->min), max(x->max, y->max)};
  }
  return std::nullopt;
}

}  // namespace tunefarm::lower
