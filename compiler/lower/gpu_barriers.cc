#include "compiler/lower/gpu_barriers.h"

#include <unordered_set>

#include "compiler/ir/visitor.h"

namespace tunefarm::lower {

using namespace ir;

namespace {

// Whether `s` stores into any of `buffers`.
bool writes(const Stmt& s, const std::unordered_set<const BufferNode*>& buffers) {
  struct Finder : IRVisitor {
    const std::unordered_set<const BufferNode*>* buffers;
    bool found = false;
    void visit_store(const Store* op) override {
      found |= buffers->count(op->buffer.get()) > 0;
      IRVisitor::visit_store(op);
    }
  } finder;
  finder.buffers = &buffers;
  finder.visit(s);
  return finder.found;
}

class BarrierInserter : public IRMutator {
 protected:
  Stmt mutate_allocate(const Stmt& s, const Allocate* op) override {
    if (op->buffer->scope != MemScope::kShared) return IRMutator::mutate_allocate(s, op);
    // The tiles allocated together at one position, outermost first, and the code inside them.
    std::vector<Buffer> tiles;
    std::unordered_set<const BufferNode*> tile_set;
    Stmt body = s;
    while (const auto* a = body->as<Allocate>()) {
      if (a->buffer->scope != MemScope::kShared) break;
      tiles.push_back(a->buffer);
      tile_set.insert(a->buffer.get());
      body = a->body;
    }
    body = mutate(body);
    if (const auto* b = body->as<Block>()) {
      size_t last_fill = b->stmts.size();
      for (size_t i = 0; i < b->stmts.size(); ++i)
        if (writes(b->stmts[i], tile_set)) last_fill = i;
      if (last_fill + 1 < b->stmts.size()) {
        Stmt barrier = evaluate(std::make_shared<Call>(Type::i64(), "gpu.barrier", std::vector<Expr>{}));
        std::vector<Stmt> stmts(b->stmts.begin(), b->stmts.begin() + static_cast<std::ptrdiff_t>(last_fill) + 1);
        stmts.push_back(barrier);
        stmts.insert(stmts.end(), b->stmts.begin() + static_cast<std::ptrdiff_t>(last_fill) + 1, b->stmts.end());
        stmts.push_back(barrier);
        body = block(std::move(stmts));
      }
    }
    for (auto it = tiles.rbegin(); it != tiles.rend(); ++it) body = allocate(*it, body);
    return body;
  }
};

}  // namespace

Stmt insert_gpu_barriers(const Stmt& s) { return BarrierInserter().mutate(s); }

}  // namespace tunefarm::lower
