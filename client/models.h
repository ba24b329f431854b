// What the model commands share: uploading an ONNX file to tunerd for its tuning tasks.
#pragma once

#include <string>
#include <vector>

#include "client/command.h"
#include "common/status.h"
#include "tunefarm/v1/tuner.pb.h"

namespace tunefarm::client {

// Sends `path` (with the --input-shape flags, NAME=d0,d1,...) to tunerd and answers its tasks.
// Errors are one line: the file, or tunerd's reason (naming the node where there is one).
StatusOr<v1::ExtractTasksResponse> extract_tasks(const GlobalFlags& global, const std::string& path,
                                                 const std::vector<std::string>& input_shapes);

}  // namespace tunefarm::client
