#include "compiler/lower/serialize_gpu.h"

#include "compiler/ir/visitor.h"

namespace tunefarm::lower {

using namespace ir;

namespace {

class Serializer : public IRMutator {
 public:
  bool cooperative = false;

 protected:
  Stmt mutate_for(const Stmt& s, const For* op) override {
    Stmt body = mutate(op->body);
    bool gpu = op->for_kind == ForKind::kGpuBlock || op->for_kind == ForKind::kGpuThread;
    if (!gpu && body == op->body) return s;
    return for_loop(op->var, op->min, op->extent, gpu ? ForKind::kSerial : op->for_kind, body);
  }
  Stmt mutate_allocate(const Stmt& s, const Allocate* op) override {
    if (op->buffer->scope == MemScope::kShared) cooperative = true;
    return IRMutator::mutate_allocate(s, op);
  }
};

}  // namespace

StatusOr<Stmt> serialize_gpu_loops(const Stmt& s) {
  Serializer ser;
  Stmt out = ser.mutate(s);
  if (ser.cooperative)
    return failed_precondition("the kernel's threads cooperate through shared memory: serial loops cannot run it");
  return out;
}

}  // namespace tunefarm::lower
