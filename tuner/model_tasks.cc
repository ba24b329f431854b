#include "tuner/model_tasks.h"

#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/helper_program.h"
#include "common/wire/wire.h"
#include "model/onnx_import.h"
#include "model/tasks.h"

namespace tunefarm {

StatusOr<v1::ExtractTasksResponse> extract_model_tasks(std::string_view onnx, const std::string& file_name,
                                                       const std::map<std::string, std::vector<int64_t>>& input_shapes) {
  model::ImportOptions options;
  options.input_shapes = input_shapes;
  options.max_bytes = kMaxModelBytes;
  TF_ASSIGN_OR_RETURN(model::Graph graph, model::import_onnx(onnx, file_name.empty() ? "the model" : file_name, options));
  TF_ASSIGN_OR_RETURN(model::TaskTable table, model::extract_tasks(graph));
  v1::ExtractTasksResponse out;
  for (const model::Task& t : table.tasks) {
    v1::ModelTask* task = out.add_tasks();
    *task->mutable_workload() = to_proto(t.workload);
    task->set_count(t.count);
    task->set_flops(t.flops);
    task->set_share(t.share);
    for (const std::string& n : t.nodes) task->add_nodes(n);
    task->set_alternative_of(t.alternative_of);
  }
  for (const auto& [op, n] : table.untuned_ops) (*out.mutable_untuned_ops())[op] = n;
  out.set_tunable_nodes(table.tunable_nodes);
  out.set_total_flops(table.total_flops);
  out.set_model_name(file_name);
  out.set_other_steps(table.other_steps);
  out.set_other_bytes(table.other_bytes);
  out.set_other_streaming_bytes(table.other_streaming_bytes);
  out.set_run_bytes(table.run_bytes);
  return out;
}

StatusOr<v1::ExtractTasksResponse> extract_model_tasks_isolated(
    std::string_view onnx, const std::string& file_name,
    const std::map<std::string, std::vector<int64_t>>& input_shapes, const ModelImportOptions& options) {
  std::string program = options.program;
  if (program.empty()) {
    TF_ASSIGN_OR_RETURN(program, find_helper_program("tunefarm-model-import"));
  }
  std::vector<std::string> argv = {program, "--name", file_name, "--memory-limit-mb",
                                   std::to_string(options.memory_limit_mb), "--cpu-seconds",
                                   std::to_string(std::max<int64_t>(1, options.timeout.count() / 1000))};
  for (const auto& [name, dims] : input_shapes) {
    argv.push_back("--input-shape");
    argv.push_back(fmt::format("{}={}", name, fmt::join(dims, ",")));
  }
  TF_ASSIGN_OR_RETURN(HelperRun run, run_helper(argv, onnx, options.timeout));
  std::string what = file_name.empty() ? "the model" : file_name;
  std::string err = run.err.substr(0, run.err.find('\n'));
  if (run.timed_out)
    return invalid_argument(fmt::format("{}: importing it took longer than {} s", what, options.timeout.count() / 1000));
  if (run.signal != 0)
    return invalid_argument(fmt::format("{}: the model crashed the ONNX importer ({}); it is malformed{}", what,
                                        strsignal(run.signal), err.empty() ? "" : ": " + err));
  if (run.exit_code == 2) return invalid_argument(err.empty() ? what + ": the model was refused" : err);
  v1::ExtractTasksResponse response;
  if (run.exit_code != 0 || !response.ParseFromString(run.out))
    return internal_error(fmt::format("{}: the model importer failed (exit status {}){}", what, run.exit_code,
                                      err.empty() ? "" : ": " + err));
  return response;
}

}  // namespace tunefarm
