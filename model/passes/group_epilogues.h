// Groups each tunable operator (Conv, Gemm, MatMul) with the elementwise operations that follow it
// and that nothing else reads — a bias Add, a residual Add, Relu, Clip (ReLU6), HardSwish, GELU
// (erf, or its tanh approximation), and SiLU or HardSwish written as x * Sigmoid(x) or x * HardSigmoid(x) — so that a built
// model runs them in the operator's kernel while its output is still in registers, and so that a
// MatMul + Add of a linear layer is seen as one dense operator with a bias.
#pragma once

#include "common/status.h"
#include "model/graph.h"

namespace tunefarm::model {

// True for the operators that become tuning tasks.
bool is_tunable(const std::string& op);

// The constant bounds of a Clip node (inputs at opset 11 and later, attributes before); false when
// they are not constants.
bool clip_bounds(const Graph& graph, const Node& clip, float& lo, float& hi);

// Answers how many nodes were folded into the operators before them.
StatusOr<int> group_epilogues(Graph& graph);

}  // namespace tunefarm::model
