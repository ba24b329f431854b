#include "compiler/te/widen_reductions.h"

#include <unordered_map>

#include "compiler/ir/visitor.h"

namespace tunefarm::te {
namespace {

class Widener {
 public:
  explicit Widener(ir::Type acc) : acc_(acc) {}

  Operation rebuild(const Operation& op) {
    if (op->kind == OperationNode::Kind::kPlaceholder) return op;
    if (auto it = rebuilt_.find(op.get()); it != rebuilt_.end()) return it->second;
    auto out = std::make_shared<OperationNode>(*op);
    out->inputs.clear();
    for (const auto& in : op->inputs) out->inputs.push_back(rebuild(in));
    ReadRebuilt reads(*this);
    out->body = reads.mutate(op->body);
    if (const auto* red = out->body->as<ir::Reduce>(); red && red->op == ir::ReduceOp::kSum) {
      out->body = std::make_shared<ir::Reduce>(red->op, widen(red->source), red->axes, red->extents);
    }
    out->buffer = ir::make_buffer(op->name, out->body->type.element(), op->buffer->shape);
    rebuilt_[op.get()] = out;
    buffer_of_[op->buffer.get()] = out->buffer;
    return out;
  }

  // The output as the caller knows it: an accumulator is converted back in a stage of its own.
  Tensor output(const Tensor& old) {
    Operation op = rebuild(old.op);
    if (op->buffer->dtype == old.buffer()->dtype) return Tensor{op};
    op->name += "_acc";
    op->buffer->name = op->name;
    Tensor acc{op};
    return compute(old.name(), old.shape(), [&](const std::vector<ir::Var>& v) {
      std::vector<ir::Expr> idx(v.begin(), v.end());
      return ir::cast(old.buffer()->dtype, acc(idx));
    });
  }

 private:
  // The expression computed in the wide type: its float leaves converted, so that a product of two
  // floats is exact and only the sum rounds.
  ir::Expr widen(const ir::Expr& e) const {
    if (!e->type.is_float() || e->type.bits >= acc_.bits) return e;
    ir::Type t = acc_.with_lanes(e->type.lanes);
    if (const auto* imm = e->as<ir::FloatImm>()) return ir::float_imm(imm->value, t);
    if (const auto* b = e->as<ir::Binary>()) return ir::binary(b->op, widen(b->a), widen(b->b));
    if (const auto* s = e->as<ir::Select>()) return ir::select(s->cond, widen(s->t), widen(s->f));
    return ir::cast(t, e);
  }

  // Loads of a rebuilt operation's tensor read its new buffer, converted to the type the reading
  // expression was written for.
  class ReadRebuilt : public ir::IRMutator {
   public:
    explicit ReadRebuilt(const Widener& w) : w_(w) {}

   protected:
    ir::Expr mutate_load(const ir::Expr& e, const ir::Load* op) override {
      ir::Expr out = IRMutator::mutate_load(e, op);
      auto it = w_.buffer_of_.find(op->buffer.get());
      if (it == w_.buffer_of_.end()) return out;
      const auto* l = out->as<ir::Load>();
      ir::Expr read = ir::load(it->second, l->indices, l->predicate);
      if (it->second->dtype == op->buffer->dtype) return read;
      return ir::cast(op->type, read);
    }

   private:
    const Widener& w_;
  };

  ir::Type acc_;
  std::unordered_map<const OperationNode*, Operation> rebuilt_;
  std::unordered_map<const ir::BufferNode*, ir::Buffer> buffer_of_;
};

}  // namespace

std::vector<Tensor> widen_reductions(const std::vector<Tensor>& args, ir::Type acc) {
  Widener w(acc);
  std::vector<Tensor> out;
  for (size_t i = 0; i < args.size(); ++i)
    out.push_back(i + 1 == args.size() ? w.output(args[i]) : Tensor{w.rebuild(args[i].op)});
  return out;
}

}  // namespace tunefarm::te
