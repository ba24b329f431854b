// What the model commands share: uploading an ONNX file to tunerd (for its tuning tasks, or to build it).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "client/command.h"
#include "common/status.h"
#include "tunefarm/v1/tuner.pb.h"

namespace tunefarm::client {

// The first chunk of a model's upload: its file name and the --input-shape flags (NAME=d0,d1,...).
StatusOr<v1::ModelChunk> first_model_chunk(const std::string& path, const std::vector<std::string>& input_shapes);
// Sends the file at `path` through `write` in chunks, `first` first.
Status stream_model(const std::string& path, v1::ModelChunk first, const std::function<bool(const v1::ModelChunk&)>& write);

// Sends `path` (with the --input-shape flags, NAME=d0,d1,...) to tunerd and answers its tasks.
// Errors are one line: the file, or tunerd's reason (naming the node where there is one).
StatusOr<v1::ExtractTasksResponse> extract_tasks(const GlobalFlags& global, const std::string& path,
                                                 const std::vector<std::string>& input_shapes);

}  // namespace tunefarm::client
