// Reads an ONNX model into the graph IR: brought to the forms libonnx knows whatever IR version
// and opset wrote it (model/onnx_opsets.h), checked by ONNX's own checker, input shapes fixed (from
// the file, or from the user where the file has symbolic dimensions), every shape inferred by
// ONNX's shape inference (with data propagation, so that Shape/Gather/Concat chains that compute a
// Reshape's target resolve once the input shape is known), constants gathered. Everything a model
// file can get wrong is an error that names what is wrong, and the node where there is one. A file
// read from disk brings the external data beside it (model/onnx_external_data.h); bytes uploaded
// to tunerd must carry their data inside them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/graph.h"
#include "model/onnx_external_data.h"

namespace tunefarm::model {

struct ImportOptions {
  // Shapes of inputs, by name; they fix the file's symbolic dimensions (--input-shape).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Larger files are refused before parsing, their external data included.
  size_t max_bytes = kMaxModelBytes;
  int64_t max_nodes = 100000;
};

// `bytes` is the serialized ModelProto; `source` names it in errors (a file name).
StatusOr<Graph> import_onnx(std::string_view bytes, std::string_view source, const ImportOptions& options = {});
StatusOr<Graph> import_onnx_file(const std::string& path, const ImportOptions& options = {});

}  // namespace tunefarm::model
