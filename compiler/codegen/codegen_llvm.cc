// Loop IR -> LLVM IR, optimization with the target's own pass pipeline, and object/PTX emission.
#include <algorithm>
#include <map>
#include <memory>
#include <limits>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/llvm_init.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/visitor.h"

namespace tunefarm::codegen {

using namespace ir;

namespace {

StatusOr<std::unique_ptr<llvm::TargetMachine>> make_target_machine(const Target& t, const TargetInfo& info) {
  TF_RETURN_IF_ERROR(check_target(t));
  init_llvm();
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(info.triple, err);
  if (!target) return invalid_argument(fmt::format("LLVM has no target for triple '{}': {}", info.triple, err));
  llvm::TargetOptions opts;
  opts.AllowFPOpFusion = llvm::FPOpFusion::Fast;
  // Loops start on a cache line, as functions do (set_attributes): a kernel timed alone and the
  // same kernel linked among a model's other steps then run the same fetch blocks. At LLVM's 16
  // bytes one depthwise convolution ran 12.9 us in a tuned MobileNetV3-Small and 10.0 in the
  // untuned one, the same config's code at another offset.
  if (info.x86) opts.LoopAlignment = 64;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      info.triple, info.cpu, info.features, opts, llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOpt::Aggressive));
  if (!tm) return invalid_argument(fmt::format("cannot create a target machine for {} / {}", info.triple, info.cpu));
  return tm;
}

// This thread's target machine for a target. Creating one, and the subtarget it makes for the
// first function it compiles (parsing ~100 feature names), cost ~3 ms of every build; a machine
// compiles one module at a time, so each thread keeps its own.
StatusOr<llvm::TargetMachine*> cached_target_machine(const Target& t, const TargetInfo& info) {
  thread_local std::map<std::string, std::unique_ptr<llvm::TargetMachine>> machines;
  std::string key = info.triple + "|" + info.cpu + "|" + info.features;
  if (auto it = machines.find(key); it != machines.end()) return it->second.get();
  TF_ASSIGN_OR_RETURN(auto tm, make_target_machine(t, info));
  if (machines.size() >= 8) machines.clear();
  return machines.emplace(key, std::move(tm)).first->second.get();
}

// Variables and buffers a statement uses but does not define: what an outlined parallel body
// needs from its parent.
struct FreeSymbols : IRVisitor {
  std::vector<const VarNode*> vars;
  std::vector<const BufferNode*> buffers;
  std::unordered_set<const VarNode*> bound;
  std::unordered_set<const BufferNode*> allocated;

  void visit_var(const VarNode* v) override {
    if (!bound.count(v) && std::find(vars.begin(), vars.end(), v) == vars.end()) vars.push_back(v);
  }
  void use(const BufferNode* b) {
    if (!allocated.count(b) && std::find(buffers.begin(), buffers.end(), b) == buffers.end()) buffers.push_back(b);
  }
  void visit_load(const Load* op) override { use(op->buffer.get()); IRVisitor::visit_load(op); }
  void visit_store(const Store* op) override { use(op->buffer.get()); IRVisitor::visit_store(op); }
  void visit_for(const For* op) override { bound.insert(op->var.get()); IRVisitor::visit_for(op); }
  void visit_let(const LetStmt* op) override { bound.insert(op->var.get()); IRVisitor::visit_let(op); }
  void visit_allocate(const Allocate* op) override { allocated.insert(op->buffer.get()); IRVisitor::visit_allocate(op); }
  using IRVisitor::visit;
};

class CodeGen {
 public:
  CodeGen(llvm::LLVMContext& ctx, llvm::Module& m, const TargetInfo& info) : ctx_(ctx), m_(m), info_(info), b_(ctx) {
    llvm::FastMathFlags fmf;
    fmf.setAllowContract(true);
    b_.setFastMathFlags(fmf);
  }

  Status emit_cpu(const LoweredFunc& f, const std::string& entry) {
    auto* ptr = llvm::PointerType::get(ctx_, 0);
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(b_.getInt32Ty(), {ptr}, false), llvm::Function::ExternalLinkage,
                                      entry, m_);
    set_attributes(fn);
    begin_function(fn);
    std::vector<const BufferNode*> tensors;
    for (size_t i = 0; i < f.args.size(); ++i) {
      auto* slot = b_.CreateConstInBoundsGEP1_64(ptr, fn->getArg(0), i);
      buffers_[f.args[i].get()] = b_.CreateLoad(ptr, slot, f.args[i]->name);
      tensors.push_back(f.args[i].get());
    }
    begin_alias_scopes(tensors, entry);
    emit(f.body);
    b_.CreateRet(b_.getInt32(0));
    return status_;
  }

  Status emit_gpu(const LoweredFunc& f, const std::string& entry, PtxKernel* launch) {
    auto* ptr = llvm::PointerType::get(ctx_, 0);
    std::vector<llvm::Type*> params(f.args.size(), ptr);
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), params, false),
                                      llvm::Function::ExternalLinkage, entry, m_);
    for (size_t i = 0; i < f.args.size(); ++i) {
      fn->addParamAttr(i, llvm::Attribute::NoAlias);
      fn->getArg(i)->setName(f.args[i]->name);
    }
    auto* md = m_.getOrInsertNamedMetadata("nvvm.annotations");
    md->addOperand(llvm::MDNode::get(ctx_, {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx_, "kernel"),
                                            llvm::ValueAsMetadata::get(b_.getInt32(1))}));
    launch_ = launch;
    collect_launch_dims(f.body);
    begin_function(fn);
    for (size_t i = 0; i < f.args.size(); ++i) buffers_[f.args[i].get()] = fn->getArg(i);
    emit(f.body);
    b_.CreateRetVoid();
    return status_;
  }

 private:
  void fail(std::string msg) {
    if (status_.ok()) status_ = invalid_argument(std::move(msg));
  }

  void set_attributes(llvm::Function* fn) {
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    if (!info_.cpu.empty()) fn->addFnAttr("target-cpu", info_.cpu);
    if (!info_.features.empty()) fn->addFnAttr("target-features", info_.features);
    if (info_.x86) {
      fn->addFnAttr("prefer-vector-width", "512");
      fn->setAlignment(llvm::Align(64));
    }
  }

  void begin_function(llvm::Function* fn) {
    fn_ = fn;
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn);
    alloca_block_ = entry;
    auto* body = llvm::BasicBlock::Create(ctx_, "body", fn);
    b_.SetInsertPoint(entry);
    b_.CreateBr(body);
    b_.SetInsertPoint(body);
    error_block_ = nullptr;
    cse_.clear();
    push_scope();
  }

  llvm::Type* llvm_type(const Type& t) {
    // 32- and 8-bit integers only as a model's int32 and bool inputs and integer outputs, loaded
    // and converted; every index is 64-bit.
    llvm::Type* s = t.is_float()                      ? (t.bits == 64 ? b_.getDoubleTy() : b_.getFloatTy())
                    : t.is_bool()                     ? b_.getInt1Ty()
                    : t.is_int() && t.bits == 32      ? b_.getInt32Ty()
                    : t.is_int() && t.bits == 8       ? b_.getInt8Ty()
                                                      : b_.getInt64Ty();
    return t.lanes > 1 ? llvm::FixedVectorType::get(s, t.lanes) : s;
  }

  llvm::Value* create_alloca(llvm::Type* t, int64_t n, const std::string& name) {
    llvm::IRBuilder<> ab(alloca_block_, alloca_block_->begin());
    // An array type, not an element count: SROA splits only allocas of one static type, and
    // turns a register tile into SSA values only then.
    auto* a = ab.CreateAlloca(llvm::ArrayType::get(t, static_cast<uint64_t>(n)), nullptr, name);
    a->setAlignment(llvm::Align(64));
    return a;
  }

  // ---- expressions ----

  // Index arithmetic repeats across the unrolled statements of a register tile; emitting each
  // distinct expression once per scope keeps the LLVM module (and its optimization time) small.
  struct CseScope {
    std::unordered_multimap<size_t, std::pair<Expr, llvm::Value*>> entries;
    // Known contents of memory: (buffer, index) -> value last loaded or stored there. Register
    // tiles are unrolled straight-line code, so forwarding stores to loads here keeps the module
    // small (LLVM would find the same with SROA, at a higher compile-time cost).
    std::vector<std::tuple<const BufferNode*, Expr, llvm::Value*>> memory;
  };

  llvm::Value* known_memory(const BufferNode* buf, const Expr& idx, const Type& type) {
    for (auto scope = cse_.rbegin(); scope != cse_.rend(); ++scope)
      for (const auto& [b, i, v] : scope->memory)
        if (b == buf && i->type == idx->type && equal(i, idx) && v->getType() == llvm_type(type)) return v;
    return nullptr;
  }
  void forget_memory(const BufferNode* buf) {
    for (auto& scope : cse_)
      std::erase_if(scope.memory, [&](const auto& m) { return std::get<0>(m) == buf; });
  }
  void remember_memory(const BufferNode* buf, const Expr& idx, llvm::Value* v) {
    if (!cse_.empty() && pure_hash(idx) != 0)
      cse_.back().memory.emplace_back(buf, idx, v);
  }
  // Buffers a statement writes: what a loop or branch invalidates.
  static std::vector<const BufferNode*> stored_buffers(const Stmt& s) {
    struct Finder : IRVisitor {
      std::vector<const BufferNode*> out;
      void visit_store(const Store* op) override {
        if (std::find(out.begin(), out.end(), op->buffer.get()) == out.end()) out.push_back(op->buffer.get());
        IRVisitor::visit_store(op);
      }
      using IRVisitor::visit;
    } f;
    f.visit(s);
    return f.out;
  }
  void forget_stored(const Stmt& s) {
    for (const BufferNode* b : stored_buffers(s)) forget_memory(b);
  }

  // A structural hash of pure integer arithmetic; 0 for what must not be reused (loads, calls).
  static size_t pure_hash(const Expr& e) {
    auto mix = [](size_t a, size_t b) { return a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2)); };
    switch (e->kind) {
      case ExprKind::kIntImm: return mix(1, static_cast<size_t>(e->as<IntImm>()->value));
      case ExprKind::kVar: return mix(2, reinterpret_cast<size_t>(e.get()));
      case ExprKind::kRamp: {
        auto* r = e->as<Ramp>();
        size_t x = pure_hash(r->base), y = pure_hash(r->stride);
        return (x && y) ? mix(mix(10, x), mix(y, static_cast<size_t>(r->lanes))) : 0;
      }
      case ExprKind::kBinary: {
        auto* b = e->as<Binary>();
        size_t x = pure_hash(b->a), y = pure_hash(b->b);
        return (x && y) ? mix(mix(3 + static_cast<size_t>(b->op), x), y) : 0;
      }
      default: return 0;
    }
  }

  void push_scope() { cse_.emplace_back(); }
  void pop_scope() { cse_.pop_back(); }

  llvm::Value* emit(const Expr& e) {
    if (e->kind != ExprKind::kBinary || !e->type.is_int() || e->type.is_vector() || cse_.empty()) return emit_uncached(e);
    size_t h = pure_hash(e);
    if (h == 0) return emit_uncached(e);
    for (auto scope = cse_.rbegin(); scope != cse_.rend(); ++scope) {
      auto [lo, hi] = scope->entries.equal_range(h);
      for (auto it = lo; it != hi; ++it)
        if (equal(it->second.first, e)) return it->second.second;
    }
    llvm::Value* v = emit_uncached(e);
    cse_.back().entries.emplace(h, std::make_pair(e, v));
    return v;
  }

  llvm::Value* emit_uncached(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kIntImm: {
        auto* op = e->as<IntImm>();
        return op->type.is_bool() ? b_.getInt1(op->value != 0) : b_.getInt64(op->value);
      }
      case ExprKind::kFloatImm: return llvm::ConstantFP::get(llvm_type(e->type), e->as<FloatImm>()->value);
      case ExprKind::kVar: {
        auto it = vars_.find(e->as<VarNode>());
        if (it == vars_.end()) {
          fail("codegen: unbound variable " + e->as<VarNode>()->name);
          return llvm::UndefValue::get(llvm_type(e->type));
        }
        return it->second;
      }
      case ExprKind::kBinary: return emit_binary(e->as<Binary>());
      case ExprKind::kCompare: {
        auto* op = e->as<Compare>();
        llvm::Value *a = emit(op->a), *c = emit(op->b);
        bool f = op->a->type.is_float();
        switch (op->op) {
          case CompareOp::kEQ: return f ? b_.CreateFCmpOEQ(a, c) : b_.CreateICmpEQ(a, c);
          case CompareOp::kNE: return f ? b_.CreateFCmpONE(a, c) : b_.CreateICmpNE(a, c);
          case CompareOp::kLT: return f ? b_.CreateFCmpOLT(a, c) : b_.CreateICmpSLT(a, c);
          case CompareOp::kLE: return f ? b_.CreateFCmpOLE(a, c) : b_.CreateICmpSLE(a, c);
          case CompareOp::kGT: return f ? b_.CreateFCmpOGT(a, c) : b_.CreateICmpSGT(a, c);
          case CompareOp::kGE: return f ? b_.CreateFCmpOGE(a, c) : b_.CreateICmpSGE(a, c);
        }
        return nullptr;
      }
      case ExprKind::kLogical: {
        auto* op = e->as<Logical>();
        llvm::Value *a = emit(op->a), *c = emit(op->b);
        return op->op == LogicalOp::kAnd ? b_.CreateAnd(a, c) : b_.CreateOr(a, c);
      }
      case ExprKind::kNot: return b_.CreateNot(emit(e->as<Not>()->a));
      case ExprKind::kSelect: {
        auto* op = e->as<Select>();
        return b_.CreateSelect(emit(op->cond), emit(op->t), emit(op->f));
      }
      case ExprKind::kCast: return emit_cast(e->as<Cast>());
      case ExprKind::kLoad: {
        const auto* l = e->as<Load>();
        if (l->predicate) return emit_load(l);
        if (llvm::Value* v = known_memory(l->buffer.get(), l->indices[0], e->type)) return v;
        llvm::Value* v = emit_load(l);
        remember_memory(l->buffer.get(), l->indices[0], v);
        return v;
      }
      case ExprKind::kBroadcast: {
        auto* op = e->as<Broadcast>();
        return b_.CreateVectorSplat(op->lanes, emit(op->value));
      }
      case ExprKind::kRamp: {
        auto* op = e->as<Ramp>();
        llvm::Value* base = b_.CreateVectorSplat(op->lanes, emit(op->base));
        llvm::Value* stride = b_.CreateVectorSplat(op->lanes, emit(op->stride));
        std::vector<llvm::Constant*> steps;
        for (int i = 0; i < op->lanes; ++i) steps.push_back(b_.getInt64(i));
        return b_.CreateAdd(base, b_.CreateMul(stride, llvm::ConstantVector::get(steps)));
      }
      case ExprKind::kCall: {
        auto* op = e->as<Call>();
        if (llvm::Value* v = emit_math(op)) return v;
        // Other threads may have written anything before a barrier.
        for (auto& scope : cse_) scope.memory.clear();
        if (op->name == "gpu.barrier" && info_.gpu) {
          b_.CreateCall(llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::nvvm_barrier0));
          return b_.getInt64(0);
        }
        fail("codegen: unknown intrinsic " + op->name);
        return b_.getInt64(0);
      }
      case ExprKind::kReduce: fail("codegen: a reduction survived lowering"); return b_.getInt64(0);
    }
    return nullptr;
  }

  llvm::Value* emit_binary(const Binary* op) {
    if (op->type.is_float() && op->op == BinaryOp::kAdd) {
      // A sum of a product is one llvm.fmuladd, as the code generator would fuse the pair anyway
      // (contractions are allowed): the unrolled reductions of the templates are mostly such sums,
      // and one instruction instead of two is less for every pass to walk.
      const Binary* mul = as_float_mul(op->b);
      Expr addend = op->a;
      if (!mul && (mul = as_float_mul(op->a))) addend = op->b;
      if (mul) {
        llvm::Value *x = emit(mul->a), *y = emit(mul->b), *z = emit(addend);
        return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, z});
      }
    }
    llvm::Value *a = emit(op->a), *c = emit(op->b);
    if (op->type.is_float()) {
      switch (op->op) {
        case BinaryOp::kAdd: return b_.CreateFAdd(a, c);
        case BinaryOp::kSub: return b_.CreateFSub(a, c);
        case BinaryOp::kMul: return b_.CreateFMul(a, c);
        case BinaryOp::kDiv: return b_.CreateFDiv(a, c);
        case BinaryOp::kMod: return b_.CreateFRem(a, c);
        case BinaryOp::kMin: return b_.CreateSelect(b_.CreateFCmpOLT(a, c), a, c);
        case BinaryOp::kMax: return b_.CreateSelect(b_.CreateFCmpOGT(a, c), a, c);
      }
    }
    switch (op->op) {
      case BinaryOp::kAdd: return b_.CreateAdd(a, c, "", false, true);
      case BinaryOp::kSub: return b_.CreateSub(a, c, "", false, true);
      case BinaryOp::kMul: return b_.CreateMul(a, c, "", false, true);
      case BinaryOp::kDiv: return b_.CreateSDiv(a, c);
      case BinaryOp::kMod: return b_.CreateSRem(a, c);
      case BinaryOp::kMin: return b_.CreateSelect(b_.CreateICmpSLT(a, c), a, c);
      case BinaryOp::kMax: return b_.CreateSelect(b_.CreateICmpSGT(a, c), a, c);
    }
    return nullptr;
  }

  static const Binary* as_float_mul(const Expr& e) {
    const Binary* b = e->kind == ExprKind::kBinary ? e->as<Binary>() : nullptr;
    return b && b->op == BinaryOp::kMul && b->type.is_float() ? b : nullptr;
  }

  llvm::Value* unary_intrinsic(llvm::Intrinsic::ID id, llvm::Value* x) {
    return b_.CreateCall(llvm::Intrinsic::getDeclaration(&m_, id, {x->getType()}), {x});
  }

  // e^x for float32 scalars or vectors, as arithmetic in 13 vector instructions (the form of
  // oneDNN's and Cephes' vector exponentials): x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts,
  // so that n ln2 is exact), n rounded by adding 1.5 * 2^23 (the sum's low mantissa bits are n
  // itself), e^r by a degree-5 polynomial fitted for relative error (1e-7; 1.7e-7 with rounding,
  // two units in the last place), and 2^n put into the exponent field straight from the sum's bits.
  // The field holds 2^(n-1) (n - 1 + 127 in [0, 254] for n in [-126, 128]) and the polynomial is
  // doubled, so that e^x up to FLT_MAX stays finite and x clamped to [-87.5, 88.8] covers both
  // ends: past 88.72 the product overflows to +inf, and where n - 1 < -126 (x < -86.99, e^x below
  // 2^-125) the field is 0 and so is e^x. The clamps are selects that let a NaN through (one vmaxps
  // or vminps each, where LLVM's minnum/maxnum take three instructions on x86 for their NaN rule),
  // and the NaN propagates through the arithmetic (softmax's row of -inf is NaN, as ONNX Runtime
  // gives). Every step stays in vector lanes.
  llvm::Value* emit_exp_arith(llvm::Value* x) {
    llvm::Type* t = x->getType();
    auto c = [&](double v) { return llvm::ConstantFP::get(t, v); };
    auto fma = [&](llvm::Value* a, llvm::Value* b, llvm::Value* addend) {
      return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {t}, {a, b, addend});
    };
    llvm::Value* xc = b_.CreateSelect(b_.CreateFCmpOLT(x, c(-87.5)), c(-87.5), x);
    xc = b_.CreateSelect(b_.CreateFCmpOGT(xc, c(88.8)), c(88.8), xc);
    const double shifter = 12582912.0 + 126.0;  // 1.5 * 2^23, plus the exponent's bias less one.
    llvm::Value* sum = fma(xc, c(1.44269504088896341), c(shifter));
    llvm::Value* n = b_.CreateFSub(sum, c(shifter));
    llvm::Value* r = fma(n, c(-0.693359375), xc);
    r = fma(n, c(2.12194440e-4), r);
    llvm::Value* p = c(2 * 8.2636559e-3);
    for (double k : {4.1898224e-2, 1.6668080e-1, 4.9999148e-1, 9.9999952e-1, 1.0}) p = fma(p, r, c(2 * k));
    llvm::Type* it = t->isVectorTy() ? llvm::VectorType::get(b_.getInt32Ty(), llvm::cast<llvm::VectorType>(t)->getElementCount())
                                     : static_cast<llvm::Type*>(b_.getInt32Ty());
    llvm::Value* scale = b_.CreateBitCast(b_.CreateShl(b_.CreateBitCast(sum, it), 23), t);
    return b_.CreateFMul(p, scale);
  }

  // erf(x) by Abramowitz and Stegun's 7.1.26: 1 - t(a1 + t(a2 + ... a5 t)) e^(-x^2) with
  // t = 1 / (1 + p|x|), absolute error below 1.5e-7, and erf's odd symmetry.
  llvm::Value* emit_erf(llvm::Value* x) {
    llvm::Type* t = x->getType();
    auto c = [&](double v) { return llvm::ConstantFP::get(t, v); };
    llvm::Value* a = unary_intrinsic(llvm::Intrinsic::fabs, x);
    llvm::Value* u = b_.CreateFDiv(c(1.0), b_.CreateFAdd(c(1.0), b_.CreateFMul(c(0.3275911), a)));
    llvm::Value* q = c(1.061405429);
    for (double k : {-1.453152027, 1.421413741, -0.284496736, 0.254829592}) q = b_.CreateFAdd(b_.CreateFMul(q, u), c(k));
    q = b_.CreateFMul(q, u);
    llvm::Value* y = b_.CreateFSub(c(1.0), b_.CreateFMul(q, emit_exp_arith(b_.CreateFNeg(b_.CreateFMul(a, a)))));
    return b_.CreateCall(llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::copysign, {t}), {y, x});
  }

  // ln(x) as arithmetic that stays in vector lanes: x = m 2^e with m in [sqrt(1/2), sqrt(2)) (from
  // the float's exponent and mantissa fields; a subnormal x scaled by 2^23 first), then
  // ln m = 2 atanh(s) = 2 (s + s^3/3 + ... + s^9/9) with s = (m - 1) / (m + 1), |s| <= 0.172, whose
  // next term is below float32's rounding; plus e ln 2. ln 0 = -inf, ln of a negative or NaN is
  // NaN, ln inf = inf.
  llvm::Value* emit_log(llvm::Value* x) {
    llvm::Type* t = x->getType();
    auto c = [&](double v) { return llvm::ConstantFP::get(t, v); };
    llvm::Type* it = t->isVectorTy() ? llvm::VectorType::get(b_.getInt32Ty(), llvm::cast<llvm::VectorType>(t)->getElementCount())
                                     : static_cast<llvm::Type*>(b_.getInt32Ty());
    auto i = [&](int64_t v) { return llvm::ConstantInt::get(it, static_cast<uint64_t>(v), true); };
    llvm::Value* subnormal = b_.CreateFCmpOLT(x, c(1.17549435e-38));
    llvm::Value* xs = b_.CreateSelect(subnormal, b_.CreateFMul(x, c(8388608.0)), x);
    llvm::Value* bits = b_.CreateBitCast(xs, it);
    llvm::Value* e = b_.CreateSub(b_.CreateLShr(bits, i(23)), i(127));
    llvm::Value* m = b_.CreateBitCast(b_.CreateOr(b_.CreateAnd(bits, i(0x7fffff)), i(0x3f800000)), t);
    llvm::Value* big = b_.CreateFCmpOGT(m, c(1.41421356));
    m = b_.CreateSelect(big, b_.CreateFMul(m, c(0.5)), m);
    e = b_.CreateSelect(big, b_.CreateAdd(e, i(1)), e);
    llvm::Value* ef = b_.CreateSIToFP(e, t);
    ef = b_.CreateSelect(subnormal, b_.CreateFSub(ef, c(23.0)), ef);
    llvm::Value* s = b_.CreateFDiv(b_.CreateFSub(m, c(1.0)), b_.CreateFAdd(m, c(1.0)));
    llvm::Value* s2 = b_.CreateFMul(s, s);
    llvm::Value* p = c(1.0 / 9);
    for (double k : {1.0 / 7, 1.0 / 5, 1.0 / 3, 1.0}) p = b_.CreateFAdd(b_.CreateFMul(p, s2), c(k));
    llvm::Value* y = b_.CreateFAdd(b_.CreateFMul(ef, c(0.69314718055994531)), b_.CreateFMul(c(2.0), b_.CreateFMul(s, p)));
    y = b_.CreateSelect(b_.CreateFCmpOEQ(x, c(0.0)), c(-std::numeric_limits<double>::infinity()), y);
    y = b_.CreateSelect(b_.CreateFCmpOEQ(x, c(std::numeric_limits<double>::infinity())), x, y);
    return b_.CreateSelect(b_.CreateFCmpOGE(x, c(0.0)), y, c(std::numeric_limits<double>::quiet_NaN()));
  }

  // tanh(x) = sign(x) (1 - 2 / (e^(2|x|) + 1)), through the arithmetic exponential (absolute error
  // ~1e-7; past 2|x| = 88.73 the exponential is +inf and the quotient 0, so tanh is exactly +-1; NaN
  // stays NaN through the exponential).
  llvm::Value* emit_tanh(llvm::Value* x) {
    llvm::Type* t = x->getType();
    auto c = [&](double v) { return llvm::ConstantFP::get(t, v); };
    llvm::Value* e = emit_exp_arith(b_.CreateFMul(c(2.0), unary_intrinsic(llvm::Intrinsic::fabs, x)));
    llvm::Value* y = b_.CreateFSub(c(1.0), b_.CreateFDiv(c(2.0), b_.CreateFAdd(e, c(1.0))));
    return b_.CreateCall(llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::copysign, {t}), {y, x});
  }

  // sin(x) or cos(x) as arithmetic in vector lanes: x = n pi/2 + r with |r| <= pi/4, the reduction
  // in double precision (n pi/2 with pi/2 in two parts; float32's reduction loses the low bits
  // past |x| ~ 8000, where a rotary embedding's angles of long sequences are), r then in float32
  // through Cephes' polynomials of sin and cos on [-pi/4, pi/4] (error ~1e-7), the quadrant n mod 4
  // choosing which and its sign (cos x = sin(x + pi/2): one quadrant on). NaN and +-inf give NaN,
  // and so does |x| >= 2^50, where x 2/pi in double no longer rounds to the nearest multiple (a
  // float32 there is a multiple of 2^27: its sine says nothing of a phase).
  llvm::Value* emit_sin_cos(llvm::Value* x, bool cosine) {
    llvm::Type* t = x->getType();
    auto with_element = [&](llvm::Type* e) {
      return t->isVectorTy() ? llvm::VectorType::get(e, llvm::cast<llvm::VectorType>(t)->getElementCount()) : e;
    };
    llvm::Type* dt = with_element(b_.getDoubleTy());
    llvm::Type* it = with_element(b_.getInt32Ty());
    auto c = [&](double v) { return llvm::ConstantFP::get(t, v); };
    auto d = [&](double v) { return llvm::ConstantFP::get(dt, v); };
    auto i = [&](int64_t v) { return llvm::ConstantInt::get(it, static_cast<uint64_t>(v), true); };
    auto fma = [&](llvm::Value* a, llvm::Value* b, llvm::Value* addend) {
      return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, b, addend});
    };
    llvm::Value* xd = b_.CreateFPExt(x, dt);
    llvm::Value* n = unary_intrinsic(llvm::Intrinsic::rint, b_.CreateFMul(xd, d(0.63661977236758134308)));
    llvm::Value* rd = fma(n, d(-1.57079632679489655800), xd);
    rd = fma(n, d(-6.12323399573676603587e-17), rd);
    llvm::Value* huge = b_.CreateFCmpUGE(unary_intrinsic(llvm::Intrinsic::fabs, xd), d(1125899906842624.0));
    llvm::Value* r = b_.CreateFPTrunc(b_.CreateSelect(huge, d(std::numeric_limits<double>::quiet_NaN()), rd), t);
    // n mod 4 in [0, 4) computed in double, then converted (a NaN quadrant, from NaN or inf, as 0:
    // the result is NaN through r anyway).
    llvm::Value* q = b_.CreateFSub(n, b_.CreateFMul(d(4.0), unary_intrinsic(llvm::Intrinsic::floor, b_.CreateFMul(n, d(0.25)))));
    q = b_.CreateSelect(b_.CreateFCmpUNO(q, q), d(0.0), q);
    llvm::Value* quadrant = b_.CreateFPToSI(q, it);
    if (cosine) quadrant = b_.CreateAdd(quadrant, i(1));
    llvm::Value* z = b_.CreateFMul(r, r);
    llvm::Value* ps = fma(fma(c(-1.9515295891e-4), z, c(8.3321608736e-3)), z, c(-1.6666654611e-1));
    llvm::Value* sine = fma(b_.CreateFMul(r, z), ps, r);
    llvm::Value* pc = fma(fma(c(2.443315711809948e-5), z, c(-1.388731625493765e-3)), z, c(4.166664568298827e-2));
    llvm::Value* cos_r = fma(b_.CreateFMul(z, z), pc, fma(z, c(-0.5), c(1.0)));
    llvm::Value* odd = b_.CreateICmpNE(b_.CreateAnd(quadrant, i(1)), i(0));
    llvm::Value* y = b_.CreateSelect(odd, cos_r, sine);
    llvm::Value* negative = b_.CreateICmpNE(b_.CreateAnd(quadrant, i(2)), i(0));
    return b_.CreateSelect(negative, b_.CreateFNeg(y), y);
  }

  // The math functions that operators outside the tuned templates need (softmax, layer norm, GELU):
  // sqrt as an LLVM intrinsic, exp, erf, tanh, log, sin and cos as arithmetic on CPUs, so that they vectorize (the
  // exp intrinsic on a vector is a call of the C library's expf per lane: softmax's exponentials
  // through it were 14% of a transformer layer; GELU's erf, 15% of a BERT layer).
  llvm::Value* emit_math(const Call* op) {
    static const std::set<std::string> kNames = {"exp", "sqrt", "erf", "tanh", "log", "sin", "cos"};
    if (!kNames.count(op->name)) return nullptr;
    if (op->args.size() != 1 || !op->type.is_float() || op->type.bits != 32) {
      fail("codegen: " + op->name + " takes one float32");
      return nullptr;
    }
    llvm::Value* x = emit(op->args[0]);
    if (op->name == "sqrt") return unary_intrinsic(llvm::Intrinsic::sqrt, x);
    if (op->name == "erf") return emit_erf(x);
    if (op->name == "tanh") return emit_tanh(x);
    if (op->name == "log") return emit_log(x);
    if (op->name == "sin" || op->name == "cos") return emit_sin_cos(x, op->name == "cos");
    // On GPUs too: NVPTX lowers the exp intrinsic to a call of expf, which a kernel cannot link.
    return emit_exp_arith(x);
  }

  llvm::Value* emit_cast(const Cast* op) {
    llvm::Value* v = emit(op->value);
    const Type& from = op->value->type;
    const Type& to = op->type;
    llvm::Type* t = llvm_type(to);
    if (from.is_float() && to.is_float()) {
      if (from.bits == to.bits) return v;
      return to.bits > from.bits ? b_.CreateFPExt(v, t) : b_.CreateFPTrunc(v, t);
    }
    if (from.is_float()) return to.is_bool() ? b_.CreateFCmpONE(v, llvm::ConstantFP::get(v->getType(), 0.0)) : b_.CreateFPToSI(v, t);
    if (to.is_float()) return from.is_bool() ? b_.CreateUIToFP(v, t) : b_.CreateSIToFP(v, t);
    if (to.is_bool()) return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
    return from.is_bool() ? b_.CreateZExt(v, t) : v;
  }

  // The tensors a function reads and writes never overlap one another, nor the buffers it
  // allocates itself. LLVM learns it from scoped alias metadata: a domain per function, a scope
  // per tensor, and every access tagged with its tensor's scope and as not aliasing the others
  // (an access to a buffer of the function's own: not aliasing any tensor). Without it, the
  // vectorized inner loops would reload what they could keep in registers. (The same facts came
  // from noalias parameters of a body function that the inliner merged into the entry, at the
  // cost of cloning every kernel once.)
  void begin_alias_scopes(const std::vector<const BufferNode*>& tensors, const std::string& name) {
    scopes_ = AliasScopes{};
    if (tensors.empty()) return;
    llvm::MDBuilder mdb(ctx_);
    llvm::MDNode* domain = mdb.createAnonymousAliasScopeDomain(name);
    std::vector<llvm::Metadata*> each;
    for (const BufferNode* t : tensors) each.push_back(mdb.createAnonymousAliasScope(domain, t->name));
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::vector<llvm::Metadata*> others;
      for (size_t j = 0; j < each.size(); ++j)
        if (j != i) others.push_back(each[j]);
      scopes_.tensor[tensors[i]] = {llvm::MDNode::get(ctx_, {each[i]}), llvm::MDNode::get(ctx_, others)};
    }
    scopes_.all = llvm::MDNode::get(ctx_, each);
  }

  llvm::Value* tag(llvm::Value* access, const BufferNode* buf) {
    auto* inst = llvm::dyn_cast<llvm::Instruction>(access);
    if (!inst || !scopes_.all) return access;
    if (auto it = scopes_.tensor.find(buf); it != scopes_.tensor.end()) {
      inst->setMetadata(llvm::LLVMContext::MD_alias_scope, it->second.own);
      inst->setMetadata(llvm::LLVMContext::MD_noalias, it->second.others);
    } else {
      inst->setMetadata(llvm::LLVMContext::MD_noalias, scopes_.all);
    }
    return access;
  }

  llvm::Value* buffer_ptr(const BufferNode* buf) {
    auto it = buffers_.find(buf);
    if (it == buffers_.end()) {
      fail("codegen: buffer " + buf->name + " is not allocated here");
      return llvm::ConstantPointerNull::get(llvm::PointerType::get(ctx_, 0));
    }
    return it->second;
  }

  // A ramp with stride 1 addresses a dense vector at its base.
  static const Ramp* dense_ramp(const Expr& idx) {
    const auto* r = idx->as<Ramp>();
    if (!r) return nullptr;
    const int64_t* s = as_const_int(r->stride);
    return s && *s == 1 ? r : nullptr;
  }

  llvm::Value* emit_load(const Load* op) { return tag(emit_untagged_load(op), op->buffer.get()); }

  llvm::Value* emit_untagged_load(const Load* op) {
    llvm::Value* base = buffer_ptr(op->buffer.get());
    llvm::Type* elem = llvm_type(op->buffer->dtype);
    const Expr& idx = op->indices[0];
    llvm::Align align(op->buffer->dtype.bytes());
    if (!idx->type.is_vector()) return b_.CreateAlignedLoad(elem, b_.CreateInBoundsGEP(elem, base, emit(idx)), align);
    int lanes = idx->type.lanes;
    if (op->predicate) {
      // Masked-off lanes may lie outside the buffer: they must not be touched.
      auto* vec = llvm::FixedVectorType::get(elem, lanes);
      llvm::Value* mask = emit(op->predicate);
      llvm::Value* zero = llvm::Constant::getNullValue(vec);
      if (const Ramp* r = dense_ramp(idx))
        return b_.CreateMaskedLoad(vec, b_.CreateInBoundsGEP(elem, base, emit(r->base)), align, mask, zero);
      return b_.CreateMaskedGather(vec, b_.CreateGEP(elem, base, emit(idx)), align, mask, zero);
    }
    if (const Ramp* r = dense_ramp(idx)) {
      auto* p = b_.CreateInBoundsGEP(elem, base, emit(r->base));
      return b_.CreateAlignedLoad(llvm::FixedVectorType::get(elem, lanes), p, align);
    }
    if (const auto* bc = idx->as<Broadcast>()) {
      auto* v = tag(b_.CreateAlignedLoad(elem, b_.CreateInBoundsGEP(elem, base, emit(bc->value)), align), op->buffer.get());
      return b_.CreateVectorSplat(lanes, v);
    }
    // Other index vectors (strided or computed) gather; AVX-512 has an instruction for it and
    // other targets get it expanded by LLVM.
    auto* ptrs = b_.CreateInBoundsGEP(elem, base, emit(idx));
    return b_.CreateMaskedGather(llvm::FixedVectorType::get(elem, lanes), ptrs, align);
  }

  void emit_store(const Store* op) {
    const BufferNode* buf = op->buffer.get();
    llvm::Value* base = buffer_ptr(buf);
    llvm::Type* elem = llvm_type(op->buffer->dtype);
    const Expr& idx = op->indices[0];
    llvm::Align align(op->buffer->dtype.bytes());
    llvm::Value* v = emit(op->value);
    // Any other element of this buffer may overlap the stored one; only this one is known now.
    forget_memory(op->buffer.get());
    if (op->predicate) {
      llvm::Value* mask = emit(op->predicate);
      if (const Ramp* r = dense_ramp(idx))
        tag(b_.CreateMaskedStore(v, b_.CreateInBoundsGEP(elem, base, emit(r->base)), align, mask), buf);
      else
        tag(b_.CreateMaskedScatter(v, b_.CreateGEP(elem, base, emit(idx)), align, mask), buf);
      return;
    }
    if (v->getType() == llvm_type(op->buffer->dtype.with_lanes(idx->type.lanes))) remember_memory(op->buffer.get(), idx, v);
    if (!idx->type.is_vector()) {
      tag(b_.CreateAlignedStore(v, b_.CreateInBoundsGEP(elem, base, emit(idx)), align), buf);
      return;
    }
    if (const Ramp* r = dense_ramp(idx)) {
      tag(b_.CreateAlignedStore(v, b_.CreateInBoundsGEP(elem, base, emit(r->base)), align), buf);
      return;
    }
    llvm::Value* vidx = emit(idx);
    for (int i = 0; i < idx->type.lanes; ++i) {
      auto* p = b_.CreateInBoundsGEP(elem, base, b_.CreateExtractElement(vidx, i));
      llvm::Value* lane = v->getType()->isVectorTy() ? b_.CreateExtractElement(v, i) : v;
      tag(b_.CreateAlignedStore(lane, p, align), buf);
    }
  }

  // ---- statements ----
  void emit(const Stmt& s) {
    if (!s || !status_.ok()) return;
    switch (s->kind) {
      case StmtKind::kFor: return emit_for(s->as<For>());
      case StmtKind::kLet: {
        auto* op = s->as<LetStmt>();
        vars_[op->var.get()] = emit(op->value);
        push_scope();
        emit(op->body);
        pop_scope();
        vars_.erase(op->var.get());
        return;
      }
      case StmtKind::kStore: return emit_store(s->as<Store>());
      case StmtKind::kAllocate: return emit_allocate(s->as<Allocate>());
      case StmtKind::kIf: {
        auto* op = s->as<IfThenElse>();
        auto* then_bb = llvm::BasicBlock::Create(ctx_, "then", fn_);
        auto* else_bb = op->else_case ? llvm::BasicBlock::Create(ctx_, "else", fn_) : nullptr;
        auto* done = llvm::BasicBlock::Create(ctx_, "endif", fn_);
        b_.CreateCondBr(emit(op->cond), then_bb, else_bb ? else_bb : done);
        b_.SetInsertPoint(then_bb);
        push_scope();
        emit(op->then_case);
        pop_scope();
        b_.CreateBr(done);
        if (else_bb) {
          b_.SetInsertPoint(else_bb);
          push_scope();
          emit(op->else_case);
          pop_scope();
          b_.CreateBr(done);
        }
        b_.SetInsertPoint(done);
        forget_stored(op->then_case);
        if (op->else_case) forget_stored(op->else_case);
        return;
      }
      case StmtKind::kBlock:
        for (const auto& st : s->as<Block>()->stmts) emit(st);
        return;
      case StmtKind::kEvaluate: emit(s->as<Evaluate>()->value); return;
    }
  }

  void emit_allocate(const Allocate* op) {
    const Buffer& buf = op->buffer;
    llvm::Type* elem = llvm_type(buf->dtype);
    int64_t n = std::max<int64_t>(1, buf->num_elements());
    if (buf->scope == MemScope::kShared) {
      if (!info_.gpu) return fail("codegen: shared memory on a CPU target (" + buf->name + ")");
      auto* arr = llvm::ArrayType::get(elem, n);
      auto* gv = new llvm::GlobalVariable(m_, arr, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(arr),
                                          buf->name, nullptr, llvm::GlobalValue::NotThreadLocal, 3);
      gv->setAlignment(llvm::Align(16));
      buffers_[buf.get()] = b_.CreateAddrSpaceCast(gv, llvm::PointerType::get(ctx_, 0));
      emit(op->body);
    } else if (buf->scope == MemScope::kWorkspace) {
      if (info_.gpu) return fail("codegen: GPU kernels cannot allocate workspace (" + buf->name + ")");
      auto* ptr = llvm::PointerType::get(ctx_, 0);
      auto alloc_fn = m_.getOrInsertFunction("tunefarm_workspace_alloc", ptr, b_.getInt64Ty());
      auto free_fn = m_.getOrInsertFunction("tunefarm_workspace_free", b_.getVoidTy(), ptr);
      llvm::Value* p = b_.CreateCall(alloc_fn, {b_.getInt64(n * buf->dtype.bytes())}, buf->name);
      auto* ok = llvm::BasicBlock::Create(ctx_, "alloc_ok", fn_);
      b_.CreateCondBr(b_.CreateIsNull(p), error_block(), ok);
      b_.SetInsertPoint(ok);
      buffers_[buf.get()] = p;
      push_scope();
      emit(op->body);
      pop_scope();
      b_.CreateCall(free_fn, {p});
    } else {
      buffers_[buf.get()] = create_alloca(elem, n, buf->name);
      emit(op->body);
    }
    buffers_.erase(buf.get());
  }

  llvm::BasicBlock* error_block() {
    if (!error_block_) {
      llvm::IRBuilder<>::InsertPointGuard guard(b_);
      error_block_ = llvm::BasicBlock::Create(ctx_, "out_of_memory", fn_);
      b_.SetInsertPoint(error_block_);
      b_.CreateRet(b_.getInt32(-1));
    }
    return error_block_;
  }

  void emit_for(const For* op) {
    if (op->for_kind == ForKind::kGpuBlock || op->for_kind == ForKind::kGpuThread) return emit_gpu_loop(op);
    if (op->for_kind == ForKind::kParallel && !info_.gpu) return emit_parallel(op);
    llvm::Value* mn = emit(op->min);
    llvm::Value* end = b_.CreateAdd(mn, emit(op->extent));
    emit_serial_loop(op->var.get(), mn, end, op->body);
  }

  void emit_serial_loop(const VarNode* var, llvm::Value* mn, llvm::Value* end, const Stmt& body) {
    auto* pre = b_.GetInsertBlock();
    auto* head = llvm::BasicBlock::Create(ctx_, "for_" + var->name, fn_);
    auto* body_bb = llvm::BasicBlock::Create(ctx_, "for_body_" + var->name, fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "for_end_" + var->name, fn_);
    // What the body writes differs between iterations and after the loop.
    forget_stored(body);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    auto* phi = b_.CreatePHI(b_.getInt64Ty(), 2, var->name);
    phi->addIncoming(mn, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(phi, end), body_bb, exit);
    b_.SetInsertPoint(body_bb);
    vars_[var] = phi;
    push_scope();
    emit(body);
    pop_scope();
    forget_stored(body);
    vars_.erase(var);
    auto* next = b_.CreateAdd(phi, b_.getInt64(1), "", true, true);
    phi->addIncoming(next, b_.GetInsertBlock());
    b_.CreateBr(head);
    b_.SetInsertPoint(exit);
  }

  // The loop body becomes `int32_t body(int32_t task, int32_t num_tasks, void* closure)`, each
  // task running a contiguous share of the iterations; the closure holds the free variables and
  // buffer pointers, one 8-byte slot each.
  void emit_parallel(const For* op) {
    FreeSymbols free;
    free.bound.insert(op->var.get());
    free.visit(op->body);
    free.visit(op->min);
    free.visit(op->extent);
    auto* ptr = llvm::PointerType::get(ctx_, 0);
    auto* i64 = b_.getInt64Ty();
    auto* i32 = b_.getInt32Ty();
    size_t nslots = free.vars.size() + free.buffers.size();
    llvm::Value* closure = create_alloca(i64, std::max<size_t>(1, nslots), "closure");
    size_t slot = 0;
    for (const VarNode* v : free.vars) b_.CreateStore(vars_.at(v), b_.CreateConstInBoundsGEP1_64(i64, closure, slot++));
    for (const BufferNode* bn : free.buffers) b_.CreateStore(buffer_ptr(bn), b_.CreateConstInBoundsGEP1_64(i64, closure, slot++));
    llvm::Value* extent = emit(op->extent);

    auto* body_fn = llvm::Function::Create(llvm::FunctionType::get(i32, {i32, i32, ptr}, false),
                                           llvm::Function::InternalLinkage, fn_->getName() + ".par_" + op->var->name, m_);
    set_attributes(body_fn);
    // Save the parent function's state, emit the body function, restore.
    auto saved_vars = vars_;
    auto saved_buffers = buffers_;
    auto saved_cse = std::move(cse_);
    cse_.clear();
    push_scope();
    auto* saved_fn = fn_;
    auto* saved_alloca = alloca_block_;
    auto* saved_error = error_block_;
    auto saved_ip = b_.saveIP();

    // The body function unpacks the closure and runs its share of the loop; the tensors it was
    // handed are scoped as the kernel's own are (begin_alias_scopes).
    begin_function(body_fn);
    vars_.clear();
    buffers_.clear();
    auto saved_scopes = std::move(scopes_);
    llvm::Value* cl = body_fn->getArg(2);
    slot = 0;
    for (const VarNode* v : free.vars) vars_[v] = b_.CreateLoad(i64, b_.CreateConstInBoundsGEP1_64(i64, cl, slot++), v->name);
    for (const BufferNode* bn : free.buffers)
      buffers_[bn] = b_.CreateLoad(ptr, b_.CreateConstInBoundsGEP1_64(i64, cl, slot++), bn->name);
    begin_alias_scopes(free.buffers, body_fn->getName().str());
    // Re-evaluate min/extent inside (they only use free variables).
    llvm::Value* lo = emit(op->min);
    llvm::Value* n = emit(op->extent);
    llvm::Value* task = b_.CreateSExt(body_fn->getArg(0), i64);
    llvm::Value* ntasks = b_.CreateSExt(body_fn->getArg(1), i64);
    // Shares of n * task / num_tasks iterations differ by at most one, and none is empty while
    // there are more iterations than tasks (rounding every share up left the last tasks nothing).
    llvm::Value* begin = b_.CreateSDiv(b_.CreateMul(n, task), ntasks);
    llvm::Value* stop = b_.CreateSDiv(b_.CreateMul(n, b_.CreateAdd(task, b_.getInt64(1))), ntasks);
    emit_serial_loop(op->var.get(), b_.CreateAdd(lo, begin), b_.CreateAdd(lo, stop), op->body);
    b_.CreateRet(b_.getInt32(0));

    vars_ = std::move(saved_vars);
    buffers_ = std::move(saved_buffers);
    scopes_ = std::move(saved_scopes);
    cse_ = std::move(saved_cse);
    fn_ = saved_fn;
    alloca_block_ = saved_alloca;
    error_block_ = saved_error;
    b_.restoreIP(saved_ip);

    auto launch = m_.getOrInsertFunction("tunefarm_parallel_launch", i32, ptr, ptr, i32);
    // Up to 64 iterations, one task each, so that the pool evens out uneven work (tails); beyond
    // that, the pool picks the count (num_tasks = 0): a few contiguous shares per thread, each
    // thread working through its own from the front (a loop of many small iterations -- rows of an
    // image, fused with channel blocks -- handed out one at a time had every thread read every
    // block's weights and every row's neighbours), the rest taken by whichever thread is free.
    constexpr int64_t kTaskPerIteration = 64;
    llvm::Value* ntask = b_.CreateTrunc(
        b_.CreateSelect(b_.CreateICmpSLE(extent, b_.getInt64(kTaskPerIteration)), extent, b_.getInt64(0)), i32);
    llvm::Value* rc = b_.CreateCall(launch, {body_fn, closure, ntask});
    forget_stored(op->body);
    auto* ok = llvm::BasicBlock::Create(ctx_, "par_ok", fn_);
    auto* bad = llvm::BasicBlock::Create(ctx_, "par_failed", fn_);
    b_.CreateCondBr(b_.CreateICmpEQ(rc, b_.getInt32(0)), ok, bad);
    b_.SetInsertPoint(bad);
    b_.CreateRet(rc);
    b_.SetInsertPoint(ok);
  }

  void collect_launch_dims(const Stmt& body) {
    struct Dims : IRVisitor {
      std::unordered_map<std::string, int64_t> dims;
      Status status;
      void visit_for(const For* op) override {
        if (!op->thread_tag.empty()) {
          const int64_t* ext = as_const_int(op->extent);
          if (!ext) status = invalid_argument("GPU loop bound to " + op->thread_tag + " has a non-constant extent");
          else dims[op->thread_tag] = std::max(dims[op->thread_tag], *ext);
        }
        IRVisitor::visit_for(op);
      }
      using IRVisitor::visit;
    } d;
    d.visit(body);
    if (!d.status.ok()) return fail(d.status.message());
    const char* axes[3] = {"x", "y", "z"};
    for (int i = 0; i < 3; ++i) {
      if (auto it = d.dims.find(std::string("blockIdx.") + axes[i]); it != d.dims.end()) launch_->grid[i] = it->second;
      if (auto it = d.dims.find(std::string("threadIdx.") + axes[i]); it != d.dims.end()) launch_->block[i] = it->second;
    }
    // CUDA's limits: a launch beyond them would fail on the device, so the candidate is invalid.
    const auto& g = launch_->grid;
    const auto& b = launch_->block;
    if (g[0] > 2147483647 || g[1] > 65535 || g[2] > 65535)
      return fail(fmt::format("launch grid {}x{}x{} exceeds CUDA's limits (x < 2^31, y and z <= 65535)", g[0], g[1], g[2]));
    if (b[0] > 1024 || b[1] > 1024 || b[2] > 64 || b[0] * b[1] * b[2] > 1024)
      return fail(fmt::format("thread block {}x{}x{} exceeds CUDA's limits (1024 threads)", b[0], b[1], b[2]));
    launch_dims_ = d.dims;
  }

  void emit_gpu_loop(const For* op) {
    if (!info_.gpu) return fail("codegen: loop bound to " + op->thread_tag + " on a CPU target");
    static const std::unordered_map<std::string, llvm::Intrinsic::ID> kRegs = {
        {"blockIdx.x", llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x}, {"blockIdx.y", llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y},
        {"blockIdx.z", llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z}, {"threadIdx.x", llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x},
        {"threadIdx.y", llvm::Intrinsic::nvvm_read_ptx_sreg_tid_y}, {"threadIdx.z", llvm::Intrinsic::nvvm_read_ptx_sreg_tid_z}};
    auto* reg = b_.CreateCall(llvm::Intrinsic::getDeclaration(&m_, kRegs.at(op->thread_tag)));
    llvm::Value* idx = b_.CreateAdd(b_.CreateZExt(reg, b_.getInt64Ty()), emit(op->min));
    vars_[op->var.get()] = idx;
    int64_t ext = *as_const_int(op->extent);
    if (ext < launch_dims_[op->thread_tag]) {
      auto* then_bb = llvm::BasicBlock::Create(ctx_, "in_range", fn_);
      auto* done = llvm::BasicBlock::Create(ctx_, "end_range", fn_);
      b_.CreateCondBr(b_.CreateICmpULT(reg, b_.getInt32(static_cast<uint32_t>(ext))), then_bb, done);
      b_.SetInsertPoint(then_bb);
      push_scope();
      emit(op->body);
      pop_scope();
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
    } else {
      push_scope();
      emit(op->body);
      pop_scope();
    }
    vars_.erase(op->var.get());
  }

  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  TargetInfo info_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* alloca_block_ = nullptr;
  llvm::BasicBlock* error_block_ = nullptr;
  std::unordered_map<const VarNode*, llvm::Value*> vars_;
  std::unordered_map<const BufferNode*, llvm::Value*> buffers_;
  struct AliasScopes {
    struct Lists {
      llvm::MDNode* own;     // the tensor's scope
      llvm::MDNode* others;  // every other tensor's
    };
    std::unordered_map<const BufferNode*, Lists> tensor;
    llvm::MDNode* all = nullptr;  // every tensor's: what a buffer of the function's own does not alias
  };
  AliasScopes scopes_;
  std::vector<CseScope> cse_;
  PtxKernel* launch_ = nullptr;
  std::unordered_map<std::string, int64_t> launch_dims_;
  Status status_;
};

// The loop IR arrives already tiled, unrolled and vectorized, so the default O3 pipeline mostly
// re-derives what the schedule says, at 2-3x the compile time (the tuner compiles thousands of
// candidates). What the generated code does need (its aliasing facts are in its metadata):
// promoting register tiles to SSA values (SROA), CSE of index arithmetic, and instruction
// combining (fused multiply-adds, addressing). Measured on matmul 1024^3: ~0.95x the speed of
// the O3 pipeline at ~40% of its time.
void optimize(llvm::Module& m, llvm::TargetMachine* tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  llvm::cantFail(pb.parsePassPipeline(mpm, "function(sroa,early-cse,instcombine,simplifycfg)"));
  mpm.run(m, mam);
}

// Generates, verifies and optimizes a module; `emit_fn` then writes what the caller wants.
template <typename EmitFn>
Status with_module(const LoweredFunc& f, const Target& target, const std::string& entry, PtxKernel* launch, EmitFn emit_fn,
                   bool optimized = true) {
  TargetInfo info = target_info(target);
  TF_ASSIGN_OR_RETURN(llvm::TargetMachine * tm, cached_target_machine(target, info));
  llvm::LLVMContext ctx;
  llvm::Module m(entry, ctx);
  m.setTargetTriple(info.triple);
  m.setDataLayout(tm->createDataLayout());
  CodeGen cg(ctx, m, info);
  TF_RETURN_IF_ERROR(info.gpu ? cg.emit_gpu(f, entry, launch) : cg.emit_cpu(f, entry));
  std::string err;
  llvm::raw_string_ostream es(err);
  if (llvm::verifyModule(m, &es)) return internal_error("codegen produced invalid LLVM IR: " + es.str());
  if (optimized) optimize(m, tm);
  return emit_fn(m, tm);
}

Status emit_file(llvm::Module& m, llvm::TargetMachine* tm, llvm::CodeGenFileType type, std::string* out) {
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  // The module was verified as generated (with_module); the optimizations that ran since are
  // LLVM's own, so the two verifier runs the code generator would add are skipped.
  if (tm->addPassesToEmitFile(pm, os, nullptr, type, /*DisableVerify=*/true)) return internal_error("the target cannot emit this file type");
  pm.run(m);
  out->assign(buf.begin(), buf.end());
  return Status();
}

}  // namespace

StatusOr<std::string> compile_object(const LoweredFunc& f, const Target& target, const std::string& entry) {
  if (target.kind != Target::Kind::kLLVM) return invalid_argument("compile_object needs an llvm target, got " + target.to_string());
  std::string out;
  TF_RETURN_IF_ERROR(with_module(f, target, entry, nullptr, [&](llvm::Module& m, llvm::TargetMachine* tm) {
    return emit_file(m, tm, llvm::CGFT_ObjectFile, &out);
  }));
  return out;
}

StatusOr<PtxKernel> compile_ptx(const LoweredFunc& f, const Target& target, const std::string& entry) {
  if (target.kind != Target::Kind::kCUDA) return invalid_argument("compile_ptx needs a cuda target, got " + target.to_string());
  PtxKernel k;
  TF_RETURN_IF_ERROR(with_module(f, target, entry, &k, [&](llvm::Module& m, llvm::TargetMachine* tm) {
    return emit_file(m, tm, llvm::CGFT_AssemblyFile, &k.ptx);
  }));
  return k;
}

StatusOr<std::string> emit_llvm_ir(const LoweredFunc& f, const Target& target, const std::string& entry, bool optimized) {
  std::string out;
  PtxKernel k;
  TF_RETURN_IF_ERROR(with_module(f, target, entry, &k, [&](llvm::Module& m, llvm::TargetMachine*) {
    llvm::raw_string_ostream os(out);
    m.print(os, nullptr);
    return Status();
  }, optimized));
  return out;
}

}  // namespace tunefarm::codegen
