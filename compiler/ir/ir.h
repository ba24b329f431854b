// The loop IR: every node type of the compiler's intermediate representation in one place.
// Expressions (immediates, variables, arithmetic, comparisons, select, cast, loads, vector
// broadcast/ramp, intrinsic calls, and the tensor-expression reduction) and statements (loops
// with their kind, let, store, allocate, if, block, evaluate). Nodes are immutable plain structs
// behind shared pointers; passes build new trees with IRMutator (ir/visitor.h).
#pragma once

#include <type_traits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tunefarm::ir {

enum class ScalarKind { kInt, kFloat, kBool, kHandle };

// Integers are always 64-bit in index arithmetic. Floats are 32-bit (the operators' dtype), except
// the 64-bit accumulators of the reference kernel (te/widen_reductions.h).
struct Type {
  ScalarKind kind = ScalarKind::kInt;
  int bits = 64;
  int lanes = 1;

  static Type i64(int lanes = 1) { return {ScalarKind::kInt, 64, lanes}; }
  static Type f32(int lanes = 1) { return {ScalarKind::kFloat, 32, lanes}; }
  static Type f64(int lanes = 1) { return {ScalarKind::kFloat, 64, lanes}; }
  static Type boolean(int lanes = 1) { return {ScalarKind::kBool, 1, lanes}; }
  Type with_lanes(int n) const { return {kind, bits, n}; }
  Type element() const { return with_lanes(1); }
  bool is_int() const { return kind == ScalarKind::kInt; }
  bool is_float() const { return kind == ScalarKind::kFloat; }
  bool is_bool() const { return kind == ScalarKind::kBool; }
  bool is_vector() const { return lanes > 1; }
  int bytes() const { return bits / 8; }
  bool operator==(const Type&) const = default;
};

// Where a buffer lives. kGlobal buffers are the kernel's arguments.
enum class MemScope { kGlobal, kLocal, kStack, kWorkspace, kShared };

struct BufferNode {
  std::string name;
  Type dtype;
  std::vector<int64_t> shape;
  MemScope scope = MemScope::kGlobal;

  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};
using Buffer = std::shared_ptr<BufferNode>;
Buffer make_buffer(std::string name, Type dtype, std::vector<int64_t> shape, MemScope scope = MemScope::kGlobal);

enum class ExprKind { kIntImm, kFloatImm, kVar, kBinary, kCompare, kLogical, kNot, kSelect, kCast, kLoad,
                      kBroadcast, kRamp, kCall, kReduce };
enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMod, kMin, kMax };
enum class CompareOp { kEQ, kNE, kLT, kLE, kGT, kGE };
enum class LogicalOp { kAnd, kOr };
enum class ReduceOp { kSum, kMax };

struct ExprNode {
  ExprKind kind;
  Type type;
  ExprNode(ExprKind k, Type t) : kind(k), type(t) {}
  virtual ~ExprNode() = default;
  template <typename T> const T* as() const { return kind == T::kKind ? static_cast<const T*>(this) : nullptr; }
};
using Expr = std::shared_ptr<const ExprNode>;

struct IntImm : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kIntImm;
  int64_t value;
  explicit IntImm(int64_t v, Type t = Type::i64()) : ExprNode(kKind, t), value(v) {}
};
struct FloatImm : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kFloatImm;
  double value;
  explicit FloatImm(double v, Type t = Type::f32()) : ExprNode(kKind, t), value(v) {}
};
// Variables compare by identity: two VarNodes with the same name are different variables.
struct VarNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kVar;
  std::string name;
  VarNode(std::string n, Type t) : ExprNode(kKind, t), name(std::move(n)) {}
};
using Var = std::shared_ptr<const VarNode>;

struct Binary : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kBinary;
  BinaryOp op;
  Expr a, b;
  Binary(BinaryOp o, Expr x, Expr y) : ExprNode(kKind, x->type), op(o), a(std::move(x)), b(std::move(y)) {}
};
struct Compare : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCompare;
  CompareOp op;
  Expr a, b;
  Compare(CompareOp o, Expr x, Expr y)
      : ExprNode(kKind, Type::boolean(x->type.lanes)), op(o), a(std::move(x)), b(std::move(y)) {}
};
struct Logical : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kLogical;
  LogicalOp op;
  Expr a, b;
  Logical(LogicalOp o, Expr x, Expr y) : ExprNode(kKind, x->type), op(o), a(std::move(x)), b(std::move(y)) {}
};
struct Not : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kNot;
  Expr a;
  explicit Not(Expr x) : ExprNode(kKind, x->type), a(std::move(x)) {}
};
struct Select : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kSelect;
  Expr cond, t, f;
  Select(Expr c, Expr x, Expr y) : ExprNode(kKind, x->type), cond(std::move(c)), t(std::move(x)), f(std::move(y)) {}
};
struct Cast : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCast;
  Expr value;
  Cast(Type t, Expr v) : ExprNode(kKind, t), value(std::move(v)) {}
};
// Before storage flattening `indices` has one entry per buffer dimension; after it, exactly one
// (the flat element offset). A vector index (ramp/broadcast) makes a vector load.
struct Load : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kLoad;
  Buffer buffer;
  std::vector<Expr> indices;
  Expr predicate;  // Vector loads only, may be null: lanes where it is false read nothing (zero).
  Load(Buffer buf, std::vector<Expr> idx, int lanes, Expr pred = nullptr)
      : ExprNode(kKind, buf->dtype.with_lanes(lanes)), buffer(std::move(buf)), indices(std::move(idx)),
        predicate(std::move(pred)) {}
};
struct Broadcast : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kBroadcast;
  Expr value;
  int lanes;
  Broadcast(Expr v, int n) : ExprNode(kKind, v->type.with_lanes(n)), value(std::move(v)), lanes(n) {}
};
// base, base + stride, ..., base + (lanes - 1) * stride
struct Ramp : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kRamp;
  Expr base, stride;
  int lanes;
  Ramp(Expr b, Expr s, int n) : ExprNode(kKind, b->type.with_lanes(n)), base(std::move(b)), stride(std::move(s)), lanes(n) {}
};
// Intrinsics the code generators know by name ("gpu.barrier", "exp", ...; see call()).
struct Call : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCall;
  std::string name;
  std::vector<Expr> args;
  Call(Type t, std::string n, std::vector<Expr> a) : ExprNode(kKind, t), name(std::move(n)), args(std::move(a)) {}
};
// A reduction over `axes` (each ranging over [0, extent)); only found in compute definitions,
// lowering turns it into an init nest and an update.
struct Reduce : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kReduce;
  ReduceOp op;
  Expr source;
  std::vector<Var> axes;
  std::vector<int64_t> extents;
  Reduce(ReduceOp o, Expr s, std::vector<Var> ax, std::vector<int64_t> ext)
      : ExprNode(kKind, s->type), op(o), source(std::move(s)), axes(std::move(ax)), extents(std::move(ext)) {}
};

enum class StmtKind { kFor, kLet, kStore, kAllocate, kIf, kBlock, kEvaluate };
enum class ForKind { kSerial, kParallel, kVectorized, kUnrolled, kGpuBlock, kGpuThread };

struct StmtNode {
  StmtKind kind;
  explicit StmtNode(StmtKind k) : kind(k) {}
  virtual ~StmtNode() = default;
  template <typename T> const T* as() const { return kind == T::kKind ? static_cast<const T*>(this) : nullptr; }
};
using Stmt = std::shared_ptr<const StmtNode>;

struct For : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kFor;
  Var var;
  Expr min, extent;
  ForKind for_kind;
  std::string thread_tag;  // "blockIdx.x" ... for the GPU kinds.
  Stmt body;
  For(Var v, Expr mn, Expr ext, ForKind k, std::string tag, Stmt b)
      : StmtNode(kKind), var(std::move(v)), min(std::move(mn)), extent(std::move(ext)), for_kind(k),
        thread_tag(std::move(tag)), body(std::move(b)) {}
};
struct LetStmt : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kLet;
  Var var;
  Expr value;
  Stmt body;
  LetStmt(Var v, Expr val, Stmt b) : StmtNode(kKind), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
};
struct Store : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kStore;
  Buffer buffer;
  Expr value;
  std::vector<Expr> indices;
  Expr predicate;  // Vector stores only, may be null: lanes where it is false are not written.
  Store(Buffer buf, Expr v, std::vector<Expr> idx, Expr pred = nullptr)
      : StmtNode(kKind), buffer(std::move(buf)), value(std::move(v)), indices(std::move(idx)), predicate(std::move(pred)) {}
};
// The buffer exists (its scope says where) for the duration of `body`.
struct Allocate : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kAllocate;
  Buffer buffer;
  Stmt body;
  Allocate(Buffer buf, Stmt b) : StmtNode(kKind), buffer(std::move(buf)), body(std::move(b)) {}
};
struct IfThenElse : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kIf;
  Expr cond;
  Stmt then_case, else_case;  // else_case may be null.
  IfThenElse(Expr c, Stmt t, Stmt e) : StmtNode(kKind), cond(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
};
struct Block : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kBlock;
  std::vector<Stmt> stmts;
  explicit Block(std::vector<Stmt> s) : StmtNode(kKind), stmts(std::move(s)) {}
};
struct Evaluate : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kEvaluate;
  Expr value;
  explicit Evaluate(Expr v) : StmtNode(kKind), value(std::move(v)) {}
};

// A lowered kernel: the loop nest over its argument buffers, in argument order.
struct LoweredFunc {
  std::string name;
  std::vector<Buffer> args;
  Stmt body;
};

// The loop nest as lowering first builds it: flattened and simplified, every loop still carrying
// its annotation (parallel, vectorized, unrolled, bound) and its full extent. Features are read
// from this form; the finishing passes turn it into the LoweredFunc that code generation takes.
struct LoopNest {
  LoweredFunc func;
};

// Constructors. Arithmetic helpers fold constants so that generated index expressions stay small.
Var make_var(std::string name, Type t = Type::i64());
Expr int_imm(int64_t v);
Expr float_imm(double v, Type t = Type::f32());
Expr bool_imm(bool v);
Expr binary(BinaryOp op, Expr a, Expr b);
Expr add(Expr a, Expr b);
Expr sub(Expr a, Expr b);
Expr mul(Expr a, Expr b);
Expr div(Expr a, Expr b);
Expr mod(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr compare(CompareOp op, Expr a, Expr b);
Expr lt(Expr a, Expr b);
Expr le(Expr a, Expr b);
Expr ge(Expr a, Expr b);
Expr logical_and(Expr a, Expr b);
Expr select(Expr c, Expr t, Expr f);
Expr cast(Type t, Expr v);
Expr load(Buffer buf, std::vector<Expr> indices, Expr predicate = nullptr);
Expr broadcast(Expr v, int lanes);
Expr ramp(Expr base, Expr stride, int lanes);
// A call of an intrinsic the code generators know: "exp", "sqrt", "erf", "tanh", "log", "sin",
// "cos" (float32 in and out), "gpu.barrier".
Expr call(Type t, std::string name, std::vector<Expr> args);

Stmt for_loop(Var v, Expr min, Expr extent, ForKind kind, Stmt body, std::string tag = "");
Stmt let_stmt(Var v, Expr value, Stmt body);
Stmt store(Buffer buf, Expr value, std::vector<Expr> indices, Expr predicate = nullptr);
Stmt allocate(Buffer buf, Stmt body);
Stmt if_then_else(Expr c, Stmt t, Stmt e = nullptr);
Stmt block(std::vector<Stmt> stmts);  // Flattens nested blocks, drops nulls; one statement stays itself.
Stmt evaluate(Expr v);

// Arithmetic operators, so that compute definitions read like the maths they implement.
inline Expr operator+(const Expr& a, const Expr& b) { return add(a, b); }
inline Expr operator-(const Expr& a, const Expr& b) { return sub(a, b); }
inline Expr operator*(const Expr& a, const Expr& b) { return mul(a, b); }
inline Expr operator/(const Expr& a, const Expr& b) { return div(a, b); }
inline Expr operator%(const Expr& a, const Expr& b) { return mod(a, b); }
inline Expr operator+(const Expr& a, int64_t b) { return add(a, int_imm(b)); }
inline Expr operator-(const Expr& a, int64_t b) { return sub(a, int_imm(b)); }
inline Expr operator*(const Expr& a, int64_t b) { return mul(a, int_imm(b)); }
inline Expr operator/(const Expr& a, int64_t b) { return div(a, int_imm(b)); }
inline Expr operator%(const Expr& a, int64_t b) { return mod(a, int_imm(b)); }
inline Expr operator*(int64_t a, const Expr& b) { return mul(int_imm(a), b); }
// A floating constant would convert to int64_t above and become an integer immediate (x * 0.5f
// multiplying by 0): write ir::float_imm(0.5f) instead.
template <typename F> requires std::is_floating_point_v<F> Expr operator+(const Expr&, F) = delete;
template <typename F> requires std::is_floating_point_v<F> Expr operator-(const Expr&, F) = delete;
template <typename F> requires std::is_floating_point_v<F> Expr operator*(const Expr&, F) = delete;
template <typename F> requires std::is_floating_point_v<F> Expr operator/(const Expr&, F) = delete;
template <typename F> requires std::is_floating_point_v<F> Expr operator*(F, const Expr&) = delete;

// The constant value of an integer immediate, if `e` is one.
const int64_t* as_const_int(const Expr& e);

std::string_view for_kind_name(ForKind kind);
std::string_view scope_name(MemScope scope);

}  // namespace tunefarm::ir
