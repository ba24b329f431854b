// Recognizes the operators that exporters write as chains of small ones, so that the rest of the
// pipeline sees (and a built model runs) one operator:
//   LayerNorm:  ReduceMean -> Sub -> Pow(2) -> ReduceMean -> Add(eps) -> Sqrt -> Div [-> Mul(gamma) -> Add(beta)]
//               (PyTorch's exporter before opset 17) becomes a "LayerNormalization" node;
//   GELU:       the elementwise nodes that compute it from one tensor (erf's form, Div(sqrt 2) -> Erf
//               -> Add(1) -> Mul(x) -> Mul(0.5) in any order of its factors, or the tanh
//               approximation, GPT-2's 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))), recognized by the
//               function they compute, become a "Gelu" node (approximate "tanh" for the latter);
//   Mish:       Softplus -> Tanh -> Mul(x) (before opset 18) becomes a "Mish" node;
//   RMSNorm:    Pow(2) -> ReduceMean -> Add(eps) -> Sqrt -> Div, or -> Reciprocal -> Mul(x),
//               [-> Mul(weight)] (LLaMA's, T5's) becomes an "RMSNormalization" node (ONNX's
//               operator from opset 23, its scale optional here).
// Normalizations are fused over the last axis only (the statistics' ReduceMeans reduce it alone).
// Only chains whose intermediate values nothing else reads are fused.
#pragma once

#include "common/status.h"
#include "model/graph.h"

namespace tunefarm::model {

// Answers how many operators were recognized.
StatusOr<int> fuse_patterns(Graph& graph);

}  // namespace tunefarm::model
