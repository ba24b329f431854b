// Walking and rewriting the loop IR. IRVisitor visits every node; IRMutator rebuilds a tree,
// sharing every subtree it did not change. Passes derive from these and override what they need.
#pragma once

#include <functional>
#include <unordered_map>

#include "compiler/ir/ir.h"

namespace tunefarm::ir {

class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  virtual void visit(const Expr& e);
  virtual void visit(const Stmt& s);

 protected:
  virtual void visit_var(const VarNode*) {}
  virtual void visit_load(const Load* op);
  virtual void visit_reduce(const Reduce* op);
  virtual void visit_for(const For* op);
  virtual void visit_let(const LetStmt* op);
  virtual void visit_store(const Store* op);
  virtual void visit_allocate(const Allocate* op);
};

class IRMutator {
 public:
  virtual ~IRMutator() = default;
  virtual Expr mutate(const Expr& e);
  virtual Stmt mutate(const Stmt& s);

 protected:
  virtual Expr mutate_var(const Expr& e) { return e; }
  virtual Expr mutate_binary(const Expr& e, const Binary* op);
  virtual Expr mutate_compare(const Expr& e, const Compare* op);
  virtual Expr mutate_logical(const Expr& e, const Logical* op);
  virtual Expr mutate_load(const Expr& e, const Load* op);
  virtual Expr mutate_select(const Expr& e, const Select* op);
  virtual Expr mutate_broadcast(const Expr& e, const Broadcast* op);
  virtual Expr mutate_ramp(const Expr& e, const Ramp* op);
  virtual Expr mutate_reduce(const Expr& e, const Reduce* op);
  virtual Stmt mutate_for(const Stmt& s, const For* op);
  virtual Stmt mutate_let(const Stmt& s, const LetStmt* op);
  virtual Stmt mutate_store(const Stmt& s, const Store* op);
  virtual Stmt mutate_allocate(const Stmt& s, const Allocate* op);
  virtual Stmt mutate_if(const Stmt& s, const IfThenElse* op);
  virtual Stmt mutate_block(const Stmt& s, const Block* op);

  std::vector<Expr> mutate_all(const std::vector<Expr>& v, bool* changed);
};

using VarMap = std::unordered_map<const VarNode*, Expr>;

// Replaces variables by expressions.
Expr substitute(const Expr& e, const VarMap& map);
Stmt substitute(const Stmt& s, const VarMap& map);

// Calls `fn` on every expression node (pre-order), including those inside statements.
void post_order_visit(const Stmt& s, const std::function<void(const Expr&)>& fn);
void post_order_visit(const Expr& e, const std::function<void(const Expr&)>& fn);

// Whether `e` mentions variable `v`.
bool uses_var(const Expr& e, const VarNode* v);
bool uses_var(const Stmt& s, const VarNode* v);

// Structural equality (variables and buffers by identity).
bool equal(const Expr& a, const Expr& b);

}  // namespace tunefarm::ir
