// Activations as compute expressions, shared by the templates' epilogues and a model's own steps,
// with their double-precision references: one definition of each function, so that a kernel that
// applies GELU in its epilogue computes what a model's separate GELU step would have.
#pragma once

#include "compiler/ir/ir.h"

namespace tunefarm::ops {

// 1 / (1 + e^-x), through the code generator's inline exponential (it vectorizes).
ir::Expr sigmoid(const ir::Expr& x);
// GELU as ONNX's Gelu (approximate "none") and BERT's erf pattern compute it: x/2 (1 + erf(x/√2)).
ir::Expr gelu(const ir::Expr& x);
double gelu_reference(double x);
// GELU's tanh approximation (ONNX's Gelu with approximate "tanh", GPT-2's gelu_new):
// x/2 (1 + tanh(√(2/π) (x + 0.044715 x³))), computed as x sigmoid(2z), the same function through
// the exponential (which vectorizes; tanh is a scalar call).
ir::Expr gelu_tanh(const ir::Expr& x);
double gelu_tanh_reference(double x);

}  // namespace tunefarm::ops
