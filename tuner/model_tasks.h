// tunerd's side of `tune-client tasks` and `submit --model`: an uploaded ONNX file to its tuning
// tasks, as the wire message. The model stays on tunerd only for the call.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/onnx_external_data.h"
#include "tunefarm/v1/tuner.pb.h"

namespace tunefarm {

// Models larger than this are refused as they arrive.
using model::kMaxModelBytes;

// In this process: what tunefarm-model-import runs.
StatusOr<v1::ExtractTasksResponse> extract_model_tasks(std::string_view onnx, const std::string& file_name,
                                                       const std::map<std::string, std::vector<int64_t>>& input_shapes);

struct ModelImportOptions {
  std::string program;                             // Empty: tunefarm-model-import, found as helpers are.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  uint64_t memory_limit_mb = 8192;
};

// The same in a process of its own (tunefarm-model-import), as tunerd does it: a model that crashes
// the ONNX library or runs out of memory or time is an INVALID_ARGUMENT saying so, and the service
// goes on.
StatusOr<v1::ExtractTasksResponse> extract_model_tasks_isolated(
    std::string_view onnx, const std::string& file_name,
    const std::map<std::string, std::vector<int64_t>>& input_shapes, const ModelImportOptions& options = {});

}  // namespace tunefarm
