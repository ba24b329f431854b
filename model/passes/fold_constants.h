// Folds the operators whose inputs are all constants and that only move data — Identity,
// Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Cast to float — into constants, as exporters
// leave them around weights (a Linear weight transposed by a Transpose node, a Constant reshaped).
// A tunable operator then sees its weight as the constant it is (a dense layer, not a matmul).
// Computations on constants alone that exporters write for attention masks (ConstantOfShape,
// Slice, ScatterND, Where, Equal, Not, arithmetic, Expand, Concat, Gather, Range) are evaluated too.
#pragma once

#include "common/status.h"
#include "model/graph.h"

namespace tunefarm::model {

// Answers how many nodes became constants.
StatusOr<int> fold_constants(Graph& graph);

}  // namespace tunefarm::model
