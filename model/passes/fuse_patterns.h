// Recognizes the operators that exporters write as chains of small ones, so that the rest of the
// pipeline sees (and a built model runs) one operator:
//   LayerNorm:  ReduceMean -> Sub -> Pow(2) -> ReduceMean -> Add(eps) -> Sqrt -> Div [-> Mul(gamma) -> Add(beta)]
//               (PyTorch's exporter before opset 17) becomes a "LayerNormalization" node;
//   GELU:       Div(sqrt 2) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5) becomes a "Gelu" node;
//   Mish:       Softplus -> Tanh -> Mul(x) (before opset 18) becomes a "Mish" node.
// Only chains whose intermediate values nothing else reads are fused.
#pragma once

#include "common/status.h"
#include "model/graph.h"

namespace tunefarm::model {

// Answers how many operators were recognized.
StatusOr<int> fuse_patterns(Graph& graph);

}  // namespace tunefarm::model
