// ONNX files that keep their weights in files beside them (what PyTorch's dynamo exporter writes,
// model.onnx.data, and onnx.save(..., save_as_external_data=True)). tune-client reads those files
// on the user's machine and uploads the model with its data inside; tunerd never opens a path a
// model names. Only files in the model's folder are read: a location that is absolute, climbs out
// with "..", or resolves outside the folder through a link is refused, and every range is checked
// against its file and its tensor's size.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <onnx/onnx_pb.h>

#include "common/status.h"

namespace tunefarm::model {

// Larger models, their data included, are refused (ResNet-50 in float32 is 100 MB).
inline constexpr size_t kMaxModelBytes = size_t{1} << 30;

// Parses a serialized ModelProto of any size up to protobuf's limit; false when it does not parse
// (or has no graph).
bool parse_onnx_model(std::string_view bytes, onnx::ModelProto& model);

// The first tensor of `model` that keeps its data outside the model, or null.
const onnx::TensorProto* first_external_tensor(onnx::ModelProto& model);

// `bytes` (the model file read from `folder`) with every external tensor's data read from its file
// in `folder` and placed inside the model; unchanged when it has none. `max_bytes` bounds the result.
StatusOr<std::string> with_external_data(std::string bytes, const std::string& folder, size_t max_bytes);

// The model file at `path` with its external data inside it (the files beside it).
StatusOr<std::string> read_model_with_external_data(const std::string& path, size_t max_bytes);

}  // namespace tunefarm::model
