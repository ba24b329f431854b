#include "compiler/lower/storage_flatten.h"

#include "compiler/ir/visitor.h"

namespace tunefarm::lower {

using namespace ir;

namespace {

Expr flat_index(const Buffer& buf, const std::vector<Expr>& idx) {
  if (idx.size() <= 1) return idx.empty() ? int_imm(0) : idx[0];
  Expr out = idx[0];
  for (size_t d = 1; d < idx.size(); ++d) out = add(mul(out, int_imm(buf->shape[d])), idx[d]);
  return out;
}

class Flattener : public IRMutator {
 protected:
  Expr mutate_load(const Expr& e, const Load* op) override {
    Expr out = IRMutator::mutate_load(e, op);
    const auto* l = out->as<Load>();
    if (l->indices.size() == 1) return out;
    return load(l->buffer, {flat_index(l->buffer, l->indices)});
  }
  Stmt mutate_store(const Stmt& s, const Store* op) override {
    Stmt out = IRMutator::mutate_store(s, op);
    const auto* st = out->as<Store>();
    if (st->indices.size() == 1) return out;
    return store(st->buffer, st->value, {flat_index(st->buffer, st->indices)});
  }
};

}  // namespace

Stmt storage_flatten(const Stmt& s) { return Flattener().mutate(s); }

}  // namespace tunefarm::lower
