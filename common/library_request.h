// What `tune-client build` asks for, and the program that builds it: `tunefarm-build-library`
// (tools/build_library_main.cc) reads records as JSON lines on stdin, picks the best per workload
// and writes the library's files into a directory. tunerd runs it on its history's best records
// (so that a compiler crash ends that process, not the service), and tune-client runs it on an
// exported records file (`--from-records`): one program builds both.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/target.h"
#include "common/workload.h"

namespace tunefarm {

inline constexpr const char* kDefaultLibraryName = "tunefarm_kernels";
inline constexpr size_t kMaxLibraryWorkloads = 256;

struct LibraryRequest {
  std::vector<Workload> workloads;
  // A model instead of workloads: the ONNX file, and the shapes of its symbolic inputs.
  std::string model_path;
  std::map<std::string, std::vector<int64_t>> input_shapes;
  Target target;
  std::string device_key;  // Empty: records of any device key.
  std::string name = kDefaultLibraryName;
  bool require_tuned = false;  // A workload without records is an error, not a default kernel.
};

// Runs tunefarm-build-library on `records_jsonl` (named `records_source` in messages); the files go
// into `out_dir` (which exists and is empty). Answers the warnings (one per workload built from its
// default config); an error is the helper's one-line reason.
StatusOr<std::vector<std::string>> run_library_builder(const LibraryRequest& request, std::string_view records_jsonl,
                                                       const std::string& records_source, const std::string& out_dir);

}  // namespace tunefarm
