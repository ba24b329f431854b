// tunerd's side of `tune-client tasks` and `submit --model`: an uploaded ONNX file to its tuning
// tasks, as the wire message. The model stays on tunerd only for the call.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tunefarm/v1/tuner.pb.h"

namespace tunefarm {

// Models larger than this are refused as they arrive (ResNet-50 in float32 is 100 MB).
inline constexpr size_t kMaxModelBytes = size_t{1} << 30;

StatusOr<v1::ExtractTasksResponse> extract_model_tasks(std::string_view onnx, const std::string& file_name,
                                                       const std::map<std::string, std::vector<int64_t>>& input_shapes);

}  // namespace tunefarm
