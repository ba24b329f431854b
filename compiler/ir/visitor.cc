#include "compiler/ir/visitor.h"

namespace tunefarm::ir {

void IRVisitor::visit(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kIntImm: case ExprKind::kFloatImm: return;
    case ExprKind::kVar: return visit_var(static_cast<const VarNode*>(e.get()));
    case ExprKind::kBinary: { auto* op = e->as<Binary>(); visit(op->a); visit(op->b); return; }
    case ExprKind::kCompare: { auto* op = e->as<Compare>(); visit(op->a); visit(op->b); return; }
    case ExprKind::kLogical: { auto* op = e->as<Logical>(); visit(op->a); visit(op->b); return; }
    case ExprKind::kNot: return visit(e->as<Not>()->a);
    case ExprKind::kSelect: { auto* op = e->as<Select>(); visit(op->cond); visit(op->t); visit(op->f); return; }
    case ExprKind::kCast: return visit(e->as<Cast>()->value);
    case ExprKind::kLoad: return visit_load(e->as<Load>());
    case ExprKind::kBroadcast: return visit(e->as<Broadcast>()->value);
    case ExprKind::kRamp: { auto* op = e->as<Ramp>(); visit(op->base); visit(op->stride); return; }
    case ExprKind::kCall: for (const auto& a : e->as<Call>()->args) visit(a); return;
    case ExprKind::kReduce: return visit_reduce(e->as<Reduce>());
  }
}

void IRVisitor::visit_load(const Load* op) {
  for (const auto& i : op->indices) visit(i);
  if (op->predicate) visit(op->predicate);
}
void IRVisitor::visit_reduce(const Reduce* op) { visit(op->source); }

void IRVisitor::visit(const Stmt& s) {
  if (!s) return;
  switch (s->kind) {
    case StmtKind::kFor: return visit_for(s->as<For>());
    case StmtKind::kLet: return visit_let(s->as<LetStmt>());
    case StmtKind::kStore: return visit_store(s->as<Store>());
    case StmtKind::kAllocate: return visit_allocate(s->as<Allocate>());
    case StmtKind::kIf: {
      auto* op = s->as<IfThenElse>();
      visit(op->cond); visit(op->then_case); visit(op->else_case);
      return;
    }
    case StmtKind::kBlock: for (const auto& st : s->as<Block>()->stmts) visit(st); return;
    case StmtKind::kEvaluate: return visit(s->as<Evaluate>()->value);
  }
}

void IRVisitor::visit_for(const For* op) { visit(op->min); visit(op->extent); visit(op->body); }
void IRVisitor::visit_let(const LetStmt* op) { visit(op->value); visit(op->body); }
void IRVisitor::visit_store(const Store* op) {
  visit(op->value);
  for (const auto& i : op->indices) visit(i);
  if (op->predicate) visit(op->predicate);
}
void IRVisitor::visit_allocate(const Allocate* op) { visit(op->body); }

std::vector<Expr> IRMutator::mutate_all(const std::vector<Expr>& v, bool* changed) {
  std::vector<Expr> out;
  out.reserve(v.size());
  for (const auto& e : v) {
    out.push_back(mutate(e));
    if (out.back() != e) *changed = true;
  }
  return out;
}

Expr IRMutator::mutate(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kIntImm: case ExprKind::kFloatImm: return e;
    case ExprKind::kVar: return mutate_var(e);
    case ExprKind::kBinary: return mutate_binary(e, e->as<Binary>());
    case ExprKind::kCompare: return mutate_compare(e, e->as<Compare>());
    case ExprKind::kLogical: return mutate_logical(e, e->as<Logical>());
    case ExprKind::kNot: {
      Expr a = mutate(e->as<Not>()->a);
      return a == e->as<Not>()->a ? e : std::make_shared<Not>(a);
    }
    case ExprKind::kSelect: return mutate_select(e, e->as<Select>());
    case ExprKind::kCast: {
      auto* op = e->as<Cast>();
      Expr v = mutate(op->value);
      return v == op->value ? e : cast(op->type.with_lanes(v->type.lanes), v);
    }
    case ExprKind::kLoad: return mutate_load(e, e->as<Load>());
    case ExprKind::kBroadcast: return mutate_broadcast(e, e->as<Broadcast>());
    case ExprKind::kRamp: return mutate_ramp(e, e->as<Ramp>());
    case ExprKind::kCall: {
      auto* op = e->as<Call>();
      bool changed = false;
      auto args = mutate_all(op->args, &changed);
      if (!changed) return e;
      // A math function of one value ("exp", "erf", ...) applies lane by lane, as a cast does.
      Type t = args.size() == 1 && op->type.is_float() ? op->type.with_lanes(args[0]->type.lanes) : op->type;
      return std::make_shared<Call>(t, op->name, std::move(args));
    }
    case ExprKind::kReduce: return mutate_reduce(e, e->as<Reduce>());
  }
  return e;
}

Expr IRMutator::mutate_binary(const Expr& e, const Binary* op) {
  Expr a = mutate(op->a), b = mutate(op->b);
  if (a == op->a && b == op->b) return e;
  return binary(op->op, a, b);
}
Expr IRMutator::mutate_compare(const Expr& e, const Compare* op) {
  Expr a = mutate(op->a), b = mutate(op->b);
  if (a == op->a && b == op->b) return e;
  return compare(op->op, a, b);
}
Expr IRMutator::mutate_logical(const Expr& e, const Logical* op) {
  Expr a = mutate(op->a), b = mutate(op->b);
  if (a == op->a && b == op->b) return e;
  if (op->op == LogicalOp::kAnd) return logical_and(a, b);
  return std::make_shared<Logical>(op->op, a, b);
}

Expr IRMutator::mutate_load(const Expr& e, const Load* op) {
  bool changed = false;
  auto idx = mutate_all(op->indices, &changed);
  Expr pred = op->predicate ? mutate(op->predicate) : nullptr;
  changed = changed || pred != op->predicate;
  return changed ? load(op->buffer, std::move(idx), pred) : e;
}
Expr IRMutator::mutate_select(const Expr& e, const Select* op) {
  Expr c = mutate(op->cond), t = mutate(op->t), f = mutate(op->f);
  if (c == op->cond && t == op->t && f == op->f) return e;
  return select(c, t, f);
}
Expr IRMutator::mutate_broadcast(const Expr& e, const Broadcast* op) {
  Expr v = mutate(op->value);
  return v == op->value ? e : broadcast(v, op->lanes);
}
Expr IRMutator::mutate_ramp(const Expr& e, const Ramp* op) {
  Expr b = mutate(op->base), s = mutate(op->stride);
  return (b == op->base && s == op->stride) ? e : ramp(b, s, op->lanes);
}
Expr IRMutator::mutate_reduce(const Expr& e, const Reduce* op) {
  Expr s = mutate(op->source);
  return s == op->source ? e : std::make_shared<Reduce>(op->op, s, op->axes, op->extents);
}

Stmt IRMutator::mutate(const Stmt& s) {
  if (!s) return s;
  switch (s->kind) {
    case StmtKind::kFor: return mutate_for(s, s->as<For>());
    case StmtKind::kLet: return mutate_let(s, s->as<LetStmt>());
    case StmtKind::kStore: return mutate_store(s, s->as<Store>());
    case StmtKind::kAllocate: return mutate_allocate(s, s->as<Allocate>());
    case StmtKind::kIf: return mutate_if(s, s->as<IfThenElse>());
    case StmtKind::kBlock: return mutate_block(s, s->as<Block>());
    case StmtKind::kEvaluate: {
      Expr v = mutate(s->as<Evaluate>()->value);
      return v == s->as<Evaluate>()->value ? s : evaluate(v);
    }
  }
  return s;
}

Stmt IRMutator::mutate_for(const Stmt& s, const For* op) {
  Expr mn = mutate(op->min), ext = mutate(op->extent);
  Stmt body = mutate(op->body);
  if (mn == op->min && ext == op->extent && body == op->body) return s;
  return for_loop(op->var, mn, ext, op->for_kind, body, op->thread_tag);
}
Stmt IRMutator::mutate_let(const Stmt& s, const LetStmt* op) {
  Expr v = mutate(op->value);
  Stmt body = mutate(op->body);
  if (v == op->value && body == op->body) return s;
  return let_stmt(op->var, v, body);
}
Stmt IRMutator::mutate_store(const Stmt& s, const Store* op) {
  Expr v = mutate(op->value);
  bool changed = v != op->value;
  auto idx = mutate_all(op->indices, &changed);
  Expr pred = op->predicate ? mutate(op->predicate) : nullptr;
  changed = changed || pred != op->predicate;
  return changed ? store(op->buffer, v, std::move(idx), pred) : s;
}
Stmt IRMutator::mutate_allocate(const Stmt& s, const Allocate* op) {
  Stmt body = mutate(op->body);
  return body == op->body ? s : allocate(op->buffer, body);
}
Stmt IRMutator::mutate_if(const Stmt& s, const IfThenElse* op) {
  Expr c = mutate(op->cond);
  Stmt t = mutate(op->then_case), e = mutate(op->else_case);
  if (c == op->cond && t == op->then_case && e == op->else_case) return s;
  return if_then_else(c, t, e);
}
Stmt IRMutator::mutate_block(const Stmt& s, const Block* op) {
  std::vector<Stmt> out;
  bool changed = false;
  for (const auto& st : op->stmts) {
    out.push_back(mutate(st));
    if (out.back() != st) changed = true;
  }
  return changed ? block(std::move(out)) : s;
}

namespace {

class Substituter : public IRMutator {
 public:
  explicit Substituter(const VarMap& m) : map_(m) {}

 protected:
  Expr mutate_var(const Expr& e) override {
    auto it = map_.find(static_cast<const VarNode*>(e.get()));
    return it == map_.end() ? e : it->second;
  }

 private:
  const VarMap& map_;
};

class ExprWalker : public IRVisitor {
 public:
  explicit ExprWalker(const std::function<void(const Expr&)>& fn) : fn_(fn) {}
  void visit(const Expr& e) override {
    fn_(e);
    IRVisitor::visit(e);
  }
  using IRVisitor::visit;

 private:
  const std::function<void(const Expr&)>& fn_;
};

}  // namespace

Expr substitute(const Expr& e, const VarMap& map) { return map.empty() ? e : Substituter(map).mutate(e); }
Stmt substitute(const Stmt& s, const VarMap& map) { return map.empty() ? s : Substituter(map).mutate(s); }

void post_order_visit(const Stmt& s, const std::function<void(const Expr&)>& fn) { ExprWalker(fn).visit(s); }
void post_order_visit(const Expr& e, const std::function<void(const Expr&)>& fn) { ExprWalker(fn).visit(e); }

bool uses_var(const Expr& e, const VarNode* v) {
  bool found = false;
  post_order_visit(e, [&](const Expr& x) { if (x.get() == v) found = true; });
  return found;
}
bool uses_var(const Stmt& s, const VarNode* v) {
  bool found = false;
  post_order_visit(s, [&](const Expr& x) { if (x.get() == v) found = true; });
  return found;
}

bool equal(const Expr& a, const Expr& b) {
  if (a == b) return true;
  if (a->kind != b->kind || !(a->type == b->type)) return false;
  switch (a->kind) {
    case ExprKind::kIntImm: return a->as<IntImm>()->value == b->as<IntImm>()->value;
    case ExprKind::kFloatImm: return a->as<FloatImm>()->value == b->as<FloatImm>()->value;
    case ExprKind::kVar: return false;
    case ExprKind::kBinary: {
      auto *x = a->as<Binary>(), *y = b->as<Binary>();
      return x->op == y->op && equal(x->a, y->a) && equal(x->b, y->b);
    }
    case ExprKind::kCompare: {
      auto *x = a->as<Compare>(), *y = b->as<Compare>();
      return x->op == y->op && equal(x->a, y->a) && equal(x->b, y->b);
    }
    case ExprKind::kLogical: {
      auto *x = a->as<Logical>(), *y = b->as<Logical>();
      return x->op == y->op && equal(x->a, y->a) && equal(x->b, y->b);
    }
    case ExprKind::kNot: return equal(a->as<Not>()->a, b->as<Not>()->a);
    case ExprKind::kSelect: {
      auto *x = a->as<Select>(), *y = b->as<Select>();
      return equal(x->cond, y->cond) && equal(x->t, y->t) && equal(x->f, y->f);
    }
    case ExprKind::kCast: return equal(a->as<Cast>()->value, b->as<Cast>()->value);
    case ExprKind::kLoad: {
      auto *x = a->as<Load>(), *y = b->as<Load>();
      if (x->buffer != y->buffer || x->indices.size() != y->indices.size()) return false;
      if ((x->predicate == nullptr) != (y->predicate == nullptr)) return false;
      if (x->predicate && !equal(x->predicate, y->predicate)) return false;
      for (size_t i = 0; i < x->indices.size(); ++i)
        if (!equal(x->indices[i], y->indices[i])) return false;
      return true;
    }
    case ExprKind::kBroadcast: return equal(a->as<Broadcast>()->value, b->as<Broadcast>()->value);
    case ExprKind::kRamp: {
      auto *x = a->as<Ramp>(), *y = b->as<Ramp>();
      return equal(x->base, y->base) && equal(x->stride, y->stride);
    }
    case ExprKind::kCall: case ExprKind::kReduce: return false;
  }
  return false;
}

}  // namespace tunefarm::ir
