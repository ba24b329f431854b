#include "gpu_interpreter.h"

#include <algorithm>
#include <atomic>
#include <list>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "compiler/ir/visitor.h"

namespace tunefarm::testing_util {

using namespace ir;

namespace {

struct Array {
  float* data;
  int64_t size;
};

// A barrier that gives up (and reports) instead of hanging when a thread never arrives.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  bool arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu_);
    int gen = generation_;
    if (++waiting_ == n_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
      return true;
    }
    return cv_.wait_for(lock, std::chrono::seconds(5), [&] { return gen != generation_; });
  }

 private:
  int n_;
  int waiting_ = 0;
  int generation_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
};

struct Block {
  std::map<std::string, int64_t> index;  // blockIdx.x -> value
  std::map<std::string, int64_t> dims;   // threadIdx.x -> launch extent
  std::unordered_map<const BufferNode*, std::vector<float>> shared;
  std::mutex shared_mu;
  Barrier* barrier = nullptr;
};

class Thread {
 public:
  Thread(Block& block, std::map<std::string, int64_t> tid, const std::unordered_map<const BufferNode*, Array>& globals)
      : block_(block), tid_(std::move(tid)), arrays_(globals) {}

  Status run(const Stmt& s) {
    exec(s);
    return status_;
  }

 private:
  void fail(std::string msg) {
    if (status_.ok()) status_ = internal_error(std::move(msg));
  }

  int64_t ival(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kIntImm: return e->as<IntImm>()->value;
      case ExprKind::kVar: {
        auto it = vars_.find(e->as<VarNode>());
        if (it == vars_.end()) fail("unbound variable " + e->as<VarNode>()->name);
        return it == vars_.end() ? 0 : it->second;
      }
      case ExprKind::kBinary: {
        auto* b = e->as<Binary>();
        int64_t x = ival(b->a), y = ival(b->b);
        switch (b->op) {
          case BinaryOp::kAdd: return x + y;
          case BinaryOp::kSub: return x - y;
          case BinaryOp::kMul: return x * y;
          case BinaryOp::kDiv: return y ? x / y : 0;
          case BinaryOp::kMod: return y ? x % y : 0;
          case BinaryOp::kMin: return std::min(x, y);
          case BinaryOp::kMax: return std::max(x, y);
        }
        return 0;
      }
      case ExprKind::kSelect: {
        auto* s = e->as<Select>();
        return bval(s->cond) ? ival(s->t) : ival(s->f);
      }
      case ExprKind::kCast: return static_cast<int64_t>(fval(e->as<Cast>()->value));
      default: fail("unsupported integer expression"); return 0;
    }
  }

  bool bval(const Expr& e) {
    if (const auto* imm = e->as<IntImm>()) return imm->value != 0;
    if (const auto* c = e->as<Compare>()) {
      bool f = c->a->type.is_float();
      double x = f ? fval(c->a) : double(ival(c->a)), y = f ? fval(c->b) : double(ival(c->b));
      switch (c->op) {
        case CompareOp::kEQ: return x == y;
        case CompareOp::kNE: return x != y;
        case CompareOp::kLT: return x < y;
        case CompareOp::kLE: return x <= y;
        case CompareOp::kGT: return x > y;
        case CompareOp::kGE: return x >= y;
      }
    }
    if (const auto* l = e->as<Logical>()) return l->op == LogicalOp::kAnd ? (bval(l->a) && bval(l->b)) : (bval(l->a) || bval(l->b));
    if (const auto* n = e->as<Not>()) return !bval(n->a);
    fail("unsupported boolean expression");
    return false;
  }

  float* element(const Buffer& buf, int64_t index) {
    auto it = arrays_.find(buf.get());
    if (it == arrays_.end()) {
      fail("buffer " + buf->name + " is not allocated");
      return nullptr;
    }
    if (index < 0 || index >= it->second.size) {
      fail(fmt::format("out-of-bounds access {}[{}] (size {})", buf->name, index, it->second.size));
      return nullptr;
    }
    return it->second.data + index;
  }

  // Values in double, rounded to float where the expression's type is 32-bit, as the GPU does.
  // Buffers hold floats, so a 64-bit accumulator in local memory is rounded when stored: the
  // emulation checks indexing and synchronisation, not the reference's extra precision.
  double fval(const Expr& e) {
    double v = fval_wide(e);
    return e->type.bits == 32 ? static_cast<float>(v) : v;
  }

  double fval_wide(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kFloatImm: return e->as<FloatImm>()->value;
      case ExprKind::kBinary: {
        auto* b = e->as<Binary>();
        double x = fval(b->a), y = fval(b->b);
        switch (b->op) {
          case BinaryOp::kAdd: return x + y;
          case BinaryOp::kSub: return x - y;
          case BinaryOp::kMul: return x * y;
          case BinaryOp::kDiv: return x / y;
          case BinaryOp::kMod: return std::fmod(x, y);
          case BinaryOp::kMin: return std::min(x, y);
          case BinaryOp::kMax: return std::max(x, y);
        }
        return 0;
      }
      case ExprKind::kSelect: {
        auto* s = e->as<Select>();
        return bval(s->cond) ? fval(s->t) : fval(s->f);
      }
      case ExprKind::kCast: {
        const Expr& v = e->as<Cast>()->value;
        return v->type.is_float() ? fval(v) : static_cast<double>(ival(v));
      }
      case ExprKind::kLoad: {
        auto* l = e->as<Load>();
        float* p = element(l->buffer, ival(l->indices[0]));
        return p ? *p : 0.0f;
      }
      case ExprKind::kCall: {
        // The math functions of an epilogue (a dense layer's GELU), as the C library computes them.
        auto* c = e->as<Call>();
        if (c->args.size() == 1) {
          double x = fval(c->args[0]);
          if (c->name == "exp") return std::exp(x);
          if (c->name == "erf") return std::erf(x);
          if (c->name == "sqrt") return std::sqrt(x);
          if (c->name == "tanh") return std::tanh(x);
          if (c->name == "log") return std::log(x);
        }
        fail("unsupported call " + c->name);
        return 0;
      }
      default: fail("unsupported float expression"); return 0;
    }
  }

  void exec(const Stmt& s) {
    if (!s || !status_.ok()) return;
    switch (s->kind) {
      case StmtKind::kFor: {
        auto* f = s->as<For>();
        if (f->for_kind == ForKind::kGpuBlock || f->for_kind == ForKind::kGpuThread) {
          int64_t idx = f->for_kind == ForKind::kGpuBlock ? block_.index.at(f->thread_tag) : tid_.at(f->thread_tag);
          // As the generated code does: a bound loop shorter than the launch skips the body.
          if (idx >= ival(f->extent)) return;
          vars_[f->var.get()] = ival(f->min) + idx;
          exec(f->body);
          return;
        }
        int64_t mn = ival(f->min), ext = ival(f->extent);
        for (int64_t i = mn; i < mn + ext && status_.ok(); ++i) {
          vars_[f->var.get()] = i;
          exec(f->body);
        }
        return;
      }
      case StmtKind::kLet: {
        auto* l = s->as<LetStmt>();
        vars_[l->var.get()] = ival(l->value);
        exec(l->body);
        return;
      }
      case StmtKind::kStore: {
        auto* st = s->as<Store>();
        if (st->value->type.is_vector() || st->indices[0]->type.is_vector()) return fail("vector code in a GPU kernel");
        float v = static_cast<float>(fval(st->value));
        if (float* p = element(st->buffer, ival(st->indices[0]))) *p = v;
        return;
      }
      case StmtKind::kAllocate: {
        auto* a = s->as<Allocate>();
        int64_t n = a->buffer->num_elements();
        std::vector<float>* storage;
        if (a->buffer->scope == MemScope::kShared) {
          std::lock_guard<std::mutex> lock(block_.shared_mu);
          auto& v = block_.shared[a->buffer.get()];
          if (v.empty()) v.assign(n, std::nanf(""));
          storage = &v;
        } else {
          locals_.emplace_back(n, std::nanf(""));
          storage = &locals_.back();
        }
        arrays_[a->buffer.get()] = Array{storage->data(), n};
        exec(a->body);
        return;
      }
      case StmtKind::kIf: {
        auto* i = s->as<IfThenElse>();
        if (bval(i->cond)) exec(i->then_case);
        else exec(i->else_case);
        return;
      }
      case StmtKind::kBlock:
        for (const auto& st : s->as<ir::Block>()->stmts) exec(st);
        return;
      case StmtKind::kEvaluate: {
        auto* c = s->as<Evaluate>()->value->as<Call>();
        if (c && c->name == "gpu.barrier") {
          if (!block_.barrier->arrive_and_wait()) fail("barrier not reached by every thread of the block");
          return;
        }
        return fail("unsupported evaluate");
      }
    }
  }

  Block& block_;
  std::map<std::string, int64_t> tid_;
  std::unordered_map<const BufferNode*, Array> arrays_;
  std::unordered_map<const VarNode*, int64_t> vars_;
  std::list<std::vector<float>> locals_;
  Status status_;
};

// Launch extents per tag, the largest extent of the loops bound to it.
std::map<std::string, int64_t> launch_dims(const Stmt& s) {
  struct Dims : IRVisitor {
    std::map<std::string, int64_t> dims;
    void visit_for(const For* op) override {
      if (!op->thread_tag.empty())
        if (const int64_t* e = as_const_int(op->extent)) dims[op->thread_tag] = std::max(dims[op->thread_tag], *e);
      IRVisitor::visit_for(op);
    }
    using IRVisitor::visit;
  } d;
  d.visit(s);
  return d.dims;
}

}  // namespace

Status interpret_gpu_kernel(const LoweredFunc& f, const std::vector<float*>& args, const std::vector<int64_t>& arg_sizes) {
  std::unordered_map<const BufferNode*, Array> globals;
  for (size_t i = 0; i < f.args.size(); ++i) globals[f.args[i].get()] = Array{args[i], arg_sizes[i]};
  auto dims = launch_dims(f.body);
  auto dim = [&](const std::string& tag) { return dims.count(tag) ? dims[tag] : int64_t{1}; };
  int64_t threads = dim("threadIdx.x") * dim("threadIdx.y") * dim("threadIdx.z");
  for (int64_t bz = 0; bz < dim("blockIdx.z"); ++bz)
    for (int64_t by = 0; by < dim("blockIdx.y"); ++by)
      for (int64_t bx = 0; bx < dim("blockIdx.x"); ++bx) {
        Block block;
        block.index = {{"blockIdx.x", bx}, {"blockIdx.y", by}, {"blockIdx.z", bz}};
        Barrier barrier(static_cast<int>(threads));
        block.barrier = &barrier;
        std::vector<Status> results(threads);
        std::vector<std::thread> pool;
        int64_t t = 0;
        for (int64_t tz = 0; tz < dim("threadIdx.z"); ++tz)
          for (int64_t ty = 0; ty < dim("threadIdx.y"); ++ty)
            for (int64_t tx = 0; tx < dim("threadIdx.x"); ++tx, ++t) {
              pool.emplace_back([&, tx, ty, tz, t] {
                Thread th(block, {{"threadIdx.x", tx}, {"threadIdx.y", ty}, {"threadIdx.z", tz}}, globals);
                results[t] = th.run(f.body);
              });
            }
        for (auto& th : pool) th.join();
        for (const auto& r : results)
          if (!r.ok()) return r.with_context(fmt::format("block ({}, {}, {})", bx, by, bz));
      }
  return Status();
}

}  // namespace tunefarm::testing_util
