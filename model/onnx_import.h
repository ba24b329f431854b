// Reads an ONNX model into the graph IR: checked by ONNX's own checker, input shapes fixed (from
// the file, or from the user where the file has symbolic dimensions), every shape inferred by
// ONNX's shape inference (with data propagation, so that Shape/Gather/Concat chains that compute a
// Reshape's target resolve once the input shape is known), constants gathered. Everything a model
// file can get wrong is an error that names what is wrong, and the node where there is one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/graph.h"

namespace tunefarm::model {

struct ImportOptions {
  // Shapes of inputs, by name; they fix the file's symbolic dimensions (--input-shape).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Larger files are refused before parsing: ResNet-50 in float32 is 100 MB.
  size_t max_bytes = size_t{1} << 30;
  int64_t max_nodes = 100000;
};

// `bytes` is the serialized ModelProto; `source` names it in errors (a file name).
StatusOr<Graph> import_onnx(std::string_view bytes, std::string_view source, const ImportOptions& options = {});
StatusOr<Graph> import_onnx_file(const std::string& path, const ImportOptions& options = {});

}  // namespace tunefarm::model
