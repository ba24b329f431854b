// Folds the elementwise steps that feed a row-wise operator into it, so that a built model reads
// their operands in the row-wise step's own passes instead of writing and reading the tensor once
// more in a step of their own (transformer layers: each is a step as long as the row-wise one):
//   residual Add -> LayerNormalization  becomes  "SkipLayerNormalization" (input, skip[, gamma[, beta]]):
//     ONNX Runtime's name for layer normalization of input + skip; the Add's two operands are
//     tensors computed at run time (an Add of a constant is a bias, left to the GEMM before it);
//   Div or Mul by a constant scalar [-> Add(mask)] -> Softmax  becomes  one "Softmax" with the
//     scale as its attribute "scale" and the mask, when there is one, as its second input:
//     softmax(x * scale + mask) (attention's scores).
// Only chains whose intermediate values nothing else reads (nor the graph's outputs) are folded.
#pragma once

#include "common/status.h"
#include "model/graph.h"

namespace tunefarm::model {

// Answers how many elementwise nodes were folded.
StatusOr<int> fuse_row_inputs(Graph& graph);

}  // namespace tunefarm::model
