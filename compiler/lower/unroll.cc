#include "compiler/lower/unroll.h"

#include "compiler/ir/visitor.h"

namespace tunefarm::lower {

using namespace ir;

namespace {

class Unroller : public IRMutator {
 public:
  explicit Unroller(int64_t max_extent) : max_extent_(max_extent) {}

 protected:
  Stmt mutate_for(const Stmt& s, const For* op) override {
    Stmt body = mutate(op->body);
    if (op->for_kind == ForKind::kUnrolled) {
      const int64_t* ext = as_const_int(op->extent);
      if (ext && *ext <= max_extent_) {
        std::vector<Stmt> copies;
        for (int64_t i = 0; i < *ext; ++i) copies.push_back(substitute(body, {{op->var.get(), add(op->min, int_imm(i))}}));
        return block(std::move(copies));
      }
      return for_loop(op->var, op->min, op->extent, ForKind::kSerial, body, op->thread_tag);
    }
    if (body == op->body) return s;
    return for_loop(op->var, op->min, op->extent, op->for_kind, body, op->thread_tag);
  }

 private:
  int64_t max_extent_;
};

}  // namespace

Stmt unroll_loops(const Stmt& s, int64_t max_extent) { return Unroller(max_extent).mutate(s); }

}  // namespace tunefarm::lower
