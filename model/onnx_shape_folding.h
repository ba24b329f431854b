// Resolves the shape computations exporters write (Shape -> Gather -> Unsqueeze -> Concat feeding a
// Reshape) once the input shapes are fixed: nodes whose result is a known integer tensor become
// initializers, so that ONNX's shape inference, run again, knows every Reshape's target. Works on
// the ONNX graph itself, before the import into our IR, because shape inference is ONNX's.
#pragma once

#include <onnx/onnx_pb.h>

#include "common/status.h"

namespace tunefarm::model {

// Folds what it can in one sweep; answers how many nodes became constants (0: nothing left).
// `graph` must have been through shape inference.
StatusOr<int> fold_shape_computations(onnx::GraphProto& graph);

}  // namespace tunefarm::model
