// The model's passes as one pipeline, run on an imported graph before its tasks are extracted
// (model/tasks.h) and before it is built (model/build.h). passes.cc reads as the pipeline; each
// pass is a file of its own here, with its own header saying what it does and why.
#pragma once

#include "common/status.h"
#include "model/graph.h"

namespace tunefarm::model {

// Constant folding, BatchNormalization folding, decomposition (Split, grouped Conv, Einsum),
// LayerNorm and GELU recognition, channel padding, epilogue grouping, in that order.
Status run_passes(Graph& graph);

}  // namespace tunefarm::model
