// libFuzzer target for the model importer: bytes as an ONNX file through import (parse, checker,
// input shapes, shape inference and shape folding) and task extraction (passes, workloads). A
// model is a client's upload to tunerd: whatever it holds must end in a graph or an error.
#include <cstdint>
#include <string_view>

#include <google/protobuf/stubs/logging.h>

#include "model/onnx_import.h"
#include "model/tasks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  tunefarm::model::ImportOptions options;
  options.max_bytes = 1 << 20;
  options.max_nodes = 1000;
  auto graph = tunefarm::model::import_onnx(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.onnx",
                                            options);
  if (graph.ok()) (void)tunefarm::model::extract_tasks(*graph);
  return 0;
}
