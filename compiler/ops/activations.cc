#include "compiler/ops/activations.h"

#include <cmath>

namespace tunefarm::ops {

namespace {
ir::Expr f32(double v) { return ir::float_imm(v); }
}  // namespace

ir::Expr sigmoid(const ir::Expr& x) { return f32(1) / (f32(1) + ir::call(ir::Type::f32(), "exp", {f32(0) - x})); }

ir::Expr gelu(const ir::Expr& x) {
  ir::Expr erf = ir::call(ir::Type::f32(), "erf", {x * f32(1.0 / std::sqrt(2.0))});
  return f32(0.5) * x * (f32(1.0) + erf);
}

double gelu_reference(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

ir::Expr gelu_tanh(const ir::Expr& x) {
  ir::Expr z = f32(std::sqrt(2.0 / M_PI)) * (x + f32(0.044715) * x * x * x);
  return x * sigmoid(f32(2) * z);
}

double gelu_tanh_reference(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

}  // namespace tunefarm::ops
