// The data of an ONNX tensor (an initializer, a Constant node's value) as a graph value, shared by
// the importer and the shape folding that runs before it.
#pragma once

#include <onnx/onnx_pb.h>

#include "common/status.h"
#include "model/graph.h"

namespace tunefarm::model {

// Copies `t`'s shape and data into `value`: float32 as floats, int64 and int32 as int64. Refuses,
// naming the tensor, external data, other element types, and data that does not fit the shape.
Status read_tensor(const onnx::TensorProto& t, Value& value);

}  // namespace tunefarm::model
