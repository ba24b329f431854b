#include "compiler/te/tensor.h"

#include <algorithm>

#include <fmt/format.h>

namespace tunefarm::te {
namespace {

// The operations whose elements a compute body reads, recorded while the body is being built.
thread_local std::vector<Operation>* recorded_inputs = nullptr;
// The reduction axes a compute body uses, so that the operation keeps the caller's IterVars.
thread_local std::vector<IterVar>* recorded_reduce_axes = nullptr;

ir::Expr make_reduce(ir::ReduceOp op, ir::Expr source, const std::vector<IterVar>& axes) {
  std::vector<ir::Var> vars;
  std::vector<int64_t> extents;
  if (recorded_reduce_axes) recorded_reduce_axes->insert(recorded_reduce_axes->end(), axes.begin(), axes.end());
  for (const auto& a : axes) {
    vars.push_back(a->var);
    extents.push_back(a->extent);
  }
  return std::make_shared<ir::Reduce>(op, std::move(source), std::move(vars), std::move(extents));
}

}  // namespace

IterVar make_iter_var(std::string name, int64_t extent, bool is_reduce) {
  return std::make_shared<IterVarNode>(IterVarNode{ir::make_var(std::move(name)), extent, is_reduce});
}

ir::Expr Tensor::operator()(std::vector<ir::Expr> indices) const {
  if (recorded_inputs && std::find(recorded_inputs->begin(), recorded_inputs->end(), op) == recorded_inputs->end())
    recorded_inputs->push_back(op);
  return ir::load(op->buffer, std::move(indices));
}

Tensor placeholder(std::string name, std::vector<int64_t> shape, ir::Type dtype) {
  auto op = std::make_shared<OperationNode>();
  op->kind = OperationNode::Kind::kPlaceholder;
  op->name = name;
  op->buffer = ir::make_buffer(std::move(name), dtype, std::move(shape));
  return Tensor{op};
}

Tensor compute(std::string name, std::vector<int64_t> shape, const ComputeFn& fn, std::vector<std::string> axis_names) {
  auto op = std::make_shared<OperationNode>();
  op->kind = OperationNode::Kind::kCompute;
  op->name = name;
  std::vector<ir::Var> vars;
  for (size_t d = 0; d < shape.size(); ++d) {
    std::string axis = d < axis_names.size() ? axis_names[d] : fmt::format("i{}", d);
    op->axes.push_back(make_iter_var(axis, shape[d], false));
    vars.push_back(op->axes.back()->var);
  }
  std::vector<Operation> inputs;
  std::vector<IterVar> reduce_axes;
  std::vector<Operation>* saved_inputs = recorded_inputs;
  std::vector<IterVar>* saved_axes = recorded_reduce_axes;
  recorded_inputs = &inputs;
  recorded_reduce_axes = &reduce_axes;
  op->body = fn(vars);
  recorded_inputs = saved_inputs;
  recorded_reduce_axes = saved_axes;
  op->inputs = std::move(inputs);
  if (op->body->as<ir::Reduce>()) op->reduce_axes = std::move(reduce_axes);
  op->buffer = ir::make_buffer(std::move(name), op->body->type.element(), std::move(shape));
  return Tensor{op};
}

IterVar reduce_axis(int64_t extent, std::string name) { return make_iter_var(std::move(name), extent, true); }

ir::Expr sum(ir::Expr source, const std::vector<IterVar>& axes) {
  return make_reduce(ir::ReduceOp::kSum, std::move(source), axes);
}
ir::Expr max_reduce(ir::Expr source, const std::vector<IterVar>& axes) {
  return make_reduce(ir::ReduceOp::kMax, std::move(source), axes);
}

}  // namespace tunefarm::te
