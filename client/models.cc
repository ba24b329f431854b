// tune-client tasks: the tuning tasks of an ONNX model, as tunerd extracts them.
#include "client/models.h"

#include <filesystem>
#include <algorithm>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "client/output.h"
#include "common/input_shape.h"
#include "common/operators/winograd.h"
#include "common/wire/wire.h"
#include "model/onnx_external_data.h"
#include "tunefarm/v1/tuner.grpc.pb.h"

namespace tunefarm::client {
namespace {

struct TasksFlags {
  std::string model;
  std::vector<std::string> input_shapes;
  bool json = false;
};

int run_tasks(const GlobalFlags& global, const TasksFlags& flags) {
  auto table = extract_tasks(global, flags.model, flags.input_shapes);
  if (!table.ok()) return fail(table.status().message());
  if (flags.json) {
    fmt::print("{}\n", to_json(*table));
    return 0;
  }
  fmt::print("{}: {} tasks from {} convolution and matrix-multiply nodes, {:.2f} GFLOPs\n", flags.model,
             table->tasks_size(), table->tunable_nodes(), table->total_flops() / 1e9);
  fmt::print("{:>5}  {:>8}  {:>6}  {}\n", "count", "GFLOPs", "share", "workload");
  std::map<std::string, int> row_of;
  for (const v1::ModelTask& t : table->tasks()) {
    auto w = from_proto(t.workload());
    std::string text = w.ok() ? w->to_string() : "?";
    row_of.emplace(text, static_cast<int>(row_of.size()) + 1);
    std::string alternative;
    if (!t.alternative_of().empty()) {
      auto row = row_of.find(t.alternative_of());
      alternative = fmt::format("  (another way to compute {}: the build takes the faster{})",
                                row == row_of.end() ? t.alternative_of() : fmt::format("row {}", row->second),
                                w.ok() && operators::winograd_by_default(*w) ? "; untuned, this one" : "");
    }
    fmt::print("{:>5}  {:>8.3f}  {:>5.1f}%  {}{}\n", t.count(), t.count() * t.flops() / 1e9, 100 * t.share(), text,
               alternative);
  }
  if (table->untuned_ops_size() > 0) {
    std::map<std::string, int> ops(table->untuned_ops().begin(), table->untuned_ops().end());
    std::vector<std::string> parts;
    for (const auto& [op, n] : ops) parts.push_back(fmt::format("{} x{}", op, n));
    fmt::print("not tuned: {}\n", fmt::join(parts, ", "));
  }
  if (table->other_steps() > 0)
    fmt::print("{} steps besides the tasks' kernels, {:.2f} MB read and written ({:.2f} MB by elementwise steps and pooling)\n",
               table->other_steps(), table->other_bytes() / 1e6, table->other_streaming_bytes() / 1e6);
  if (table->run_bytes() > 0) fmt::print("one run touches {:.2f} MB (constants, activations, inputs, outputs)\n", table->run_bytes() / 1e6);
  return 0;
}

}  // namespace

StatusOr<v1::ModelChunk> first_model_chunk(const std::string& path, const std::vector<std::string>& input_shapes) {
  v1::ModelChunk first;
  first.set_file_name(std::filesystem::path(path).filename().string());
  for (const std::string& text : input_shapes) {
    TF_ASSIGN_OR_RETURN(auto shape, parse_input_shape(text));
    v1::InputShape* s = first.add_input_shapes();
    s->set_name(shape.first);
    for (int64_t d : shape.second) s->add_dims(d);
  }
  return first;
}

Status stream_model(const std::string& path, v1::ModelChunk first, const std::function<bool(const v1::ModelChunk&)>& write) {
  // The files a model keeps its weights in are read here, beside it, and go up inside it: tunerd
  // opens no path a model names.
  TF_ASSIGN_OR_RETURN(std::string bytes, model::read_model_with_external_data(path, model::kMaxModelBytes));
  // Chunks well under gRPC's default message limit: a model may be hundreds of megabytes.
  constexpr size_t kChunkBytes = 1 << 20;
  v1::ModelChunk chunk = std::move(first);
  size_t at = 0;
  do {
    size_t n = std::min(kChunkBytes, bytes.size() - at);
    chunk.set_onnx(bytes.data() + at, n);
    at += n;
    if (!write(chunk)) break;
    chunk.Clear();
  } while (at < bytes.size());
  return Status();
}

StatusOr<v1::ExtractTasksResponse> extract_tasks(const GlobalFlags& global, const std::string& path,
                                                 const std::vector<std::string>& input_shapes) {
  TF_ASSIGN_OR_RETURN(v1::ModelChunk first, first_model_chunk(path, input_shapes));
  auto stub = v1::Tuner::NewStub(dial(global.server));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  v1::ExtractTasksResponse response;
  auto writer = stub->ExtractTasks(&context, &response);
  TF_RETURN_IF_ERROR(stream_model(path, std::move(first), [&](const v1::ModelChunk& c) { return writer->Write(c); }));
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  // tunerd reads the model's tasks: an unreachable one is named with what to check; its refusals
  // of the model are said as it says them.
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE)
    return unavailable(rpc_failure_message(global.server, "the model's tasks need tunerd", status));
  if (!status.ok()) return from_grpc(status);
  return response;
}

void add_models_commands(CLI::App& app, const GlobalFlags& global, Commands& commands) {
  auto tasks = std::make_shared<TasksFlags>();
  CLI::App* t = app.add_subcommand("tasks", "The tuning tasks of an ONNX model: workloads, counts and FLOP shares");
  t->add_option("--model", tasks->model, "ONNX file")->required()->check(CLI::ExistingFile);
  t->add_option("--input-shape", tasks->input_shapes, "NAME=d0,d1,... for an input with symbolic dimensions (repeatable)");
  t->add_flag("--json", tasks->json, "Print the table as JSON");
  commands.push_back({t, [&global, tasks] { return run_tasks(global, *tasks); }});
}

}  // namespace tunefarm::client
