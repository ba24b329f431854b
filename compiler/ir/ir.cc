#include "compiler/ir/ir.h"

#include <algorithm>

namespace tunefarm::ir {

Buffer make_buffer(std::string name, Type dtype, std::vector<int64_t> shape, MemScope scope) {
  auto b = std::make_shared<BufferNode>();
  b->name = std::move(name);
  b->dtype = dtype;
  b->shape = std::move(shape);
  b->scope = scope;
  return b;
}

Var make_var(std::string name, Type t) { return std::make_shared<VarNode>(std::move(name), t); }
Expr int_imm(int64_t v) { return std::make_shared<IntImm>(v); }
Expr float_imm(double v, Type t) { return std::make_shared<FloatImm>(v, t); }
Expr bool_imm(bool v) { return std::make_shared<IntImm>(v ? 1 : 0, Type::boolean()); }

const int64_t* as_const_int(const Expr& e) {
  if (const auto* imm = e->as<IntImm>(); imm && imm->type.is_int()) return &imm->value;
  return nullptr;
}

Expr binary(BinaryOp op, Expr a, Expr b) {
  const int64_t* ca = as_const_int(a);
  const int64_t* cb = as_const_int(b);
  if (ca && cb) {
    int64_t x = *ca, y = *cb;
    switch (op) {
      case BinaryOp::kAdd: return int_imm(x + y);
      case BinaryOp::kSub: return int_imm(x - y);
      case BinaryOp::kMul: return int_imm(x * y);
      // C semantics, as the code generators emit them; index arithmetic is non-negative anyway.
      case BinaryOp::kDiv: if (y != 0) return int_imm(x / y); break;
      case BinaryOp::kMod: if (y != 0) return int_imm(x % y); break;
      case BinaryOp::kMin: return int_imm(std::min(x, y));
      case BinaryOp::kMax: return int_imm(std::max(x, y));
    }
  }
  if (cb && a->type.is_int()) {
    if (*cb == 0 && (op == BinaryOp::kAdd || op == BinaryOp::kSub)) return a;
    if (*cb == 1 && (op == BinaryOp::kMul || op == BinaryOp::kDiv)) return a;
    if (*cb == 0 && op == BinaryOp::kMul) return b;
  }
  if (ca && b->type.is_int()) {
    if (*ca == 0 && op == BinaryOp::kAdd) return b;
    if (*ca == 1 && op == BinaryOp::kMul) return b;
    if (*ca == 0 && op == BinaryOp::kMul) return a;
  }
  return std::make_shared<Binary>(op, std::move(a), std::move(b));
}

Expr add(Expr a, Expr b) { return binary(BinaryOp::kAdd, std::move(a), std::move(b)); }
Expr sub(Expr a, Expr b) { return binary(BinaryOp::kSub, std::move(a), std::move(b)); }
Expr mul(Expr a, Expr b) { return binary(BinaryOp::kMul, std::move(a), std::move(b)); }
Expr div(Expr a, Expr b) { return binary(BinaryOp::kDiv, std::move(a), std::move(b)); }
Expr mod(Expr a, Expr b) { return binary(BinaryOp::kMod, std::move(a), std::move(b)); }
Expr min(Expr a, Expr b) { return binary(BinaryOp::kMin, std::move(a), std::move(b)); }
Expr max(Expr a, Expr b) { return binary(BinaryOp::kMax, std::move(a), std::move(b)); }

Expr compare(CompareOp op, Expr a, Expr b) {
  const int64_t* ca = as_const_int(a);
  const int64_t* cb = as_const_int(b);
  if (ca && cb) {
    int64_t x = *ca, y = *cb;
    switch (op) {
      case CompareOp::kEQ: return bool_imm(x == y);
      case CompareOp::kNE: return bool_imm(x != y);
      case CompareOp::kLT: return bool_imm(x < y);
      case CompareOp::kLE: return bool_imm(x <= y);
      case CompareOp::kGT: return bool_imm(x > y);
      case CompareOp::kGE: return bool_imm(x >= y);
    }
  }
  return std::make_shared<Compare>(op, std::move(a), std::move(b));
}
Expr lt(Expr a, Expr b) { return compare(CompareOp::kLT, std::move(a), std::move(b)); }
Expr le(Expr a, Expr b) { return compare(CompareOp::kLE, std::move(a), std::move(b)); }
Expr ge(Expr a, Expr b) { return compare(CompareOp::kGE, std::move(a), std::move(b)); }

Expr logical_and(Expr a, Expr b) {
  if (const auto* ia = a->as<IntImm>()) return ia->value ? b : a;
  if (const auto* ib = b->as<IntImm>()) return ib->value ? a : b;
  return std::make_shared<Logical>(LogicalOp::kAnd, std::move(a), std::move(b));
}

Expr select(Expr c, Expr t, Expr f) {
  if (const auto* ic = c->as<IntImm>()) return ic->value ? t : f;
  return std::make_shared<Select>(std::move(c), std::move(t), std::move(f));
}

Expr call(Type t, std::string name, std::vector<Expr> args) {
  return std::make_shared<Call>(t, std::move(name), std::move(args));
}

Expr cast(Type t, Expr v) {
  if (v->type == t) return v;
  return std::make_shared<Cast>(t, std::move(v));
}

Expr load(Buffer buf, std::vector<Expr> indices, Expr predicate) {
  int lanes = 1;
  for (const auto& i : indices) lanes = std::max(lanes, i->type.lanes);
  return std::make_shared<Load>(std::move(buf), std::move(indices), lanes, std::move(predicate));
}

Expr broadcast(Expr v, int lanes) { return std::make_shared<Broadcast>(std::move(v), lanes); }
Expr ramp(Expr base, Expr stride, int lanes) { return std::make_shared<Ramp>(std::move(base), std::move(stride), lanes); }

Stmt for_loop(Var v, Expr min, Expr extent, ForKind kind, Stmt body, std::string tag) {
  return std::make_shared<For>(std::move(v), std::move(min), std::move(extent), kind, std::move(tag), std::move(body));
}
Stmt let_stmt(Var v, Expr value, Stmt body) { return std::make_shared<LetStmt>(std::move(v), std::move(value), std::move(body)); }
Stmt store(Buffer buf, Expr value, std::vector<Expr> indices, Expr predicate) {
  return std::make_shared<Store>(std::move(buf), std::move(value), std::move(indices), std::move(predicate));
}
Stmt allocate(Buffer buf, Stmt body) { return std::make_shared<Allocate>(std::move(buf), std::move(body)); }
Stmt if_then_else(Expr c, Stmt t, Stmt e) { return std::make_shared<IfThenElse>(std::move(c), std::move(t), std::move(e)); }
Stmt evaluate(Expr v) { return std::make_shared<Evaluate>(std::move(v)); }

Stmt block(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (auto& s : stmts) {
    if (!s) continue;
    if (const auto* b = s->as<Block>()) flat.insert(flat.end(), b->stmts.begin(), b->stmts.end());
    else flat.push_back(std::move(s));
  }
  if (flat.size() == 1) return flat[0];
  return std::make_shared<Block>(std::move(flat));
}

std::string_view for_kind_name(ForKind kind) {
  switch (kind) {
    case ForKind::kSerial: return "serial";
    case ForKind::kParallel: return "parallel";
    case ForKind::kVectorized: return "vectorized";
    case ForKind::kUnrolled: return "unrolled";
    case ForKind::kGpuBlock: return "gpu_block";
    case ForKind::kGpuThread: return "gpu_thread";
  }
  return "?";
}

std::string_view scope_name(MemScope scope) {
  switch (scope) {
    case MemScope::kGlobal: return "global";
    case MemScope::kLocal: return "local";
    case MemScope::kStack: return "stack";
    case MemScope::kWorkspace: return "workspace";
    case MemScope::kShared: return "shared";
  }
  return "?";
}

}  // namespace tunefarm::ir
