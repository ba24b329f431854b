// Tensor expressions: the compute definitions of operators, in the style of TVM's `te`.
// A placeholder is an input; `compute(shape, fn)` defines every element of a new tensor from
// other tensors, with optional reductions (`sum`, `max_reduce`) over reduction axes. Chaining
// computes gives multi-stage definitions (a packing stage, the main compute, an epilogue).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace tunefarm::te {

// A loop axis: a variable with its extent. Root axes belong to a compute definition (spatial or
// reduction); schedules derive more axes from them by splitting and fusing.
struct IterVarNode {
  ir::Var var;
  int64_t extent;  // Root axes only; derived axes get their extents during bound inference.
  bool is_reduce;
};
using IterVar = std::shared_ptr<IterVarNode>;

IterVar make_iter_var(std::string name, int64_t extent, bool is_reduce);

struct Tensor;

struct OperationNode {
  enum class Kind { kPlaceholder, kCompute };
  Kind kind;
  std::string name;
  ir::Buffer buffer;                 // The tensor this operation produces.
  std::vector<IterVar> axes;         // Compute only: one per output dimension.
  std::vector<IterVar> reduce_axes;  // Compute only: the axes of the body's reduction.
  ir::Expr body;                     // Compute only: in terms of the axes' variables.
  std::vector<std::shared_ptr<OperationNode>> inputs;  // Operations whose tensors the body reads.
};
using Operation = std::shared_ptr<OperationNode>;

struct Tensor {
  Operation op;

  const ir::Buffer& buffer() const { return op->buffer; }
  const std::vector<int64_t>& shape() const { return op->buffer->shape; }
  const std::string& name() const { return op->name; }
  // An element access, for use inside a compute body.
  ir::Expr operator()(std::vector<ir::Expr> indices) const;
  template <typename... Args>
  ir::Expr operator()(Args... args) const { return (*this)(std::vector<ir::Expr>{to_expr(args)...}); }

 private:
  static ir::Expr to_expr(const ir::Expr& e) { return e; }
  static ir::Expr to_expr(const ir::Var& v) { return v; }
  static ir::Expr to_expr(int64_t v) { return ir::int_imm(v); }
  static ir::Expr to_expr(int v) { return ir::int_imm(v); }
};

Tensor placeholder(std::string name, std::vector<int64_t> shape, ir::Type dtype = ir::Type::f32());

using ComputeFn = std::function<ir::Expr(const std::vector<ir::Var>&)>;
// `axis_names` names the axes (i, j, ...) so that printed IR reads well; defaults to i0, i1, ...
Tensor compute(std::string name, std::vector<int64_t> shape, const ComputeFn& fn, std::vector<std::string> axis_names = {});

IterVar reduce_axis(int64_t extent, std::string name);
ir::Expr sum(ir::Expr source, const std::vector<IterVar>& axes);
ir::Expr max_reduce(ir::Expr source, const std::vector<IterVar>& axes);

}  // namespace tunefarm::te
