#include "common/library_request.h"

#include <string.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/helper_program.h"

namespace tunefarm {

// Compiling up to kMaxLibraryWorkloads kernels and linking them.
constexpr std::chrono::minutes kLibraryBuildTimeout{20};

StatusOr<std::vector<std::string>> run_library_builder(const LibraryRequest& request, std::string_view records_jsonl,
                                                       const std::string& records_source, const std::string& out_dir) {
  TF_ASSIGN_OR_RETURN(std::string program, find_helper_program("tunefarm-build-library"));
  std::vector<std::string> argv = {program, "--target", request.target.to_string(), "--name", request.name, "--out", out_dir,
                                   "--records-name", records_source};
  if (!request.device_key.empty()) argv.insert(argv.end(), {"--device", request.device_key});
  if (request.require_tuned) argv.push_back("--require-tuned");
  for (const auto& w : request.workloads) argv.insert(argv.end(), {"--workload", w.to_string()});
  if (!request.model_path.empty()) argv.insert(argv.end(), {"--model", request.model_path});
  for (const auto& [input, dims] : request.input_shapes)
    argv.insert(argv.end(), {"--input-shape", fmt::format("{}={}", input, fmt::join(dims, ","))});
  TF_ASSIGN_OR_RETURN(HelperRun run, run_helper(argv, records_jsonl, kLibraryBuildTimeout));
  std::string err = run.err;
  while (!err.empty() && err.back() == '\n') err.pop_back();
  err = err.substr(err.rfind('\n') == std::string::npos ? 0 : err.rfind('\n') + 1);
  if (run.timed_out) return deadline_exceeded(fmt::format("building the library took longer than {} minutes", kLibraryBuildTimeout.count()));
  if (run.signal != 0) return internal_error(fmt::format("the library builder crashed ({})", strsignal(run.signal)));
  if (run.exit_code != 0) return Status(run.exit_code == 3 ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
                                        err.empty() ? "the library builder failed" : err);
  std::vector<std::string> warnings;
  for (size_t start = 0; start < run.out.size();) {
    size_t end = run.out.find('\n', start);
    if (end == std::string::npos) end = run.out.size();
    if (end > start) warnings.push_back(run.out.substr(start, end - start));
    start = end + 1;
  }
  return warnings;
}

}  // namespace tunefarm
