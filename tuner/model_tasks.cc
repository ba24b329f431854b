#include "tuner/model_tasks.h"

#include "common/wire.h"
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
  }
  for (const auto& [op, n] : table.untuned_ops) (*out.mutable_untuned_ops())[op] = n;
  out.set_tunable_nodes(table.tunable_nodes);
  out.set_total_flops(table.total_flops);
  out.set_model_name(file_name);
  return out;
}

}  // namespace tunefarm
