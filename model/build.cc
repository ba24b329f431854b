#include "model/build.h"

#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/operators/operator.h"
#include "compiler/build.h"
#include "compiler/c_source.h"
#include "model/passes/passes.h"
#include "model/program.h"
#include "model/tasks.h"

namespace tunefarm::model {

// A built model's fixed C, embedded at build time (library_c/model_sources.cc.in).
namespace library_c {
extern const char kHeader[];
extern const char kSource[];
}  // namespace library_c

namespace {

using json = nlohmann::ordered_json;

constexpr int64_t kAlignment = 64;
// "TFWEIGHT", a format version, the fingerprint of the data and its size, then the data.
constexpr char kWeightsMagic[8] = {'T', 'F', 'W', 'E', 'I', 'G', 'H', 'T'};
constexpr uint64_t kWeightsVersion = 1;
constexpr int64_t kWeightsHeaderBytes = 64;

uint64_t fnv1a(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

struct Tensors {
  std::map<std::string, int64_t> weight_offsets;  // Constant value -> offset in the weights data.
  std::string weights;                              // The data, each constant 64-byte aligned.
};

// The constants the steps read, laid out in the weights data in the order the steps first read them.
Tensors collect_weights(const Program& p) {
  Tensors t;
  for (const Step& step : p.steps)
    for (const auto& name : step.tensors) {
      const std::string& root = p.storage(name);
      const Value* v = p.graph.find(root);
      if (!v || !v->constant || t.weight_offsets.count(root)) continue;
      t.weights.resize(static_cast<size_t>((t.weights.size() + kAlignment - 1) / kAlignment * kAlignment), '\0');
      t.weight_offsets[root] = static_cast<int64_t>(t.weights.size());
      std::vector<float> data = v->floats;
      if (!v->is_float) data.assign(v->ints.begin(), v->ints.end());
      data.resize(static_cast<size_t>(std::max<int64_t>(1, v->elements())), 0.f);
      t.weights.append(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
    }
  return t;
}

std::string shape_array(const std::vector<int64_t>& shape) {
  std::string out;
  for (int64_t d : shape) out += fmt::format("{}{}", out.empty() ? "" : ", ", d);
  return out.empty() ? "1" : out;
}

std::string header_text(const std::string& name, const Target& target, const Graph& g) {
  std::string io;
  for (const auto* list : {&g.inputs, &g.outputs})
    for (const auto& v : *list)
      io += fmt::format(" *   {} {}: {}{}\n", list == &g.inputs ? "input " : "output", v, g.find(v)->dtype,
                        shape_string(g.find(v)->shape));
  return c_source::instantiate(library_c::kHeader, name, {{"TARGET", target.to_string()}, {"IO", io}});
}

std::string io_tables(const std::string& prefix, const Graph& g, const std::vector<std::string>& list) {
  std::string names, dtypes, ranks, shapes, pointers;
  for (size_t i = 0; i < list.size(); ++i) {
    const Value* v = g.find(list[i]);
    names += c_source::string_literal(list[i]) + ", ";
    dtypes += c_source::string_literal(v->dtype) + ", ";
    ranks += fmt::format("{}, ", std::max<size_t>(1, v->shape.size()));
    shapes += fmt::format("static const int64_t {}_shape_{}[] = {{{}}};\n", prefix, i, shape_array(v->shape));
    pointers += fmt::format("{}_shape_{}, ", prefix, i);
  }
  if (list.empty()) names = dtypes = ranks = pointers = "0";
  return fmt::format("{}static const char* const {}_names[] = {{{}}};\nstatic const char* const {}_dtypes[] = {{{}}};\n"
                     "static const int {}_ranks[] = {{{}}};\n"
                     "static const int64_t* const {}_shapes[] = {{{}}};\nstatic const int64_t {}_sizes[] = {{{}}};\n",
                     shapes, prefix, names, prefix, dtypes, prefix, ranks, prefix, pointers, prefix,
                     [&] {
                       std::string e;
                       for (const auto& n : list) e += fmt::format("{}, ", std::max<int64_t>(1, g.find(n)->elements()));
                       return e.empty() ? std::string("0") : e;
                     }());
}

// The model's tables (model/library_c/model.c says what each is).
std::string tables(const Program& p, const MemoryPlan& plan, const Tensors& weights, const std::vector<std::string>& entries,
                   uint64_t fingerprint) {
  const Graph& g = p.graph;
  // Where each value lives: the caller's buffers, the weights or the arena.
  auto where = [&](const std::string& value) -> std::string {
    const std::string& root = p.storage(value);
    for (size_t i = 0; i < g.inputs.size(); ++i)
      if (g.inputs[i] == root) return fmt::format("IN_INPUT, {}", i);
    for (size_t i = 0; i < g.outputs.size(); ++i)
      if (g.outputs[i] == root) return fmt::format("IN_OUTPUT, {}", i);
    if (auto it = weights.weight_offsets.find(root); it != weights.weight_offsets.end())
      return fmt::format("IN_WEIGHTS, {}", it->second);
    return fmt::format("IN_ARENA, {}", plan.offsets.at(root));
  };
  std::string step_names, kernels, args, repeats, first_arg = "0";
  size_t max_args = 1, arg_count = 0;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const Step& step = p.steps[s];
    step_names += "  " + c_source::string_literal(fmt::format("{} ({})", step.node, step.op)) + ",\n";
    kernels += fmt::format("  {},\n", entries[s]);
    args += "  ";
    // Every value is float32 in the arena and the weights (an integer input is read once, by the
    // step that converts it, which does not repeat).
    for (size_t t = 0; t < step.tensors.size(); ++t)
      args += fmt::format("{{{}, {}}}, ", where(step.tensors[t]), step.strides.empty() ? 0 : step.strides[t] * 4);
    args += "\n";
    repeats += fmt::format("{}, ", step.repeat);
    arg_count += step.tensors.size();
    max_args = std::max(max_args, step.tensors.size());
    first_arg += fmt::format(", {}", arg_count);
  }
  std::string out = fmt::format(
      "enum {{ NUM_INPUTS = {}, NUM_OUTPUTS = {}, NUM_STEPS = {}, MAX_STEP_ARGS = {}, WEIGHTS_HEADER_BYTES = {}, "
      "WEIGHTS_VERSION = {} }};\n",
      g.inputs.size(), g.outputs.size(), p.steps.size(), max_args, kWeightsHeaderBytes, kWeightsVersion);
  out += fmt::format("static const uint64_t kFingerprint = {}ull;\nstatic const int64_t kWeightsBytes = {};\n"
                     "static const int64_t kArenaBytes = {};\n",
                     fingerprint, weights.weights.size(), std::max<int64_t>(plan.arena_bytes, 64));
  out += io_tables("input", g, g.inputs) + io_tables("output", g, g.outputs);
  out += fmt::format("static const char* const step_names[] = {{\n{}}};\n", step_names);
  for (const auto& entry : std::set<std::string>(entries.begin(), entries.end()))
    out += fmt::format("int32_t {}(void* const* args);\n", entry);
  out += fmt::format("static int32_t (*const step_kernels[])(void* const*) = {{\n{}}};\n", kernels);
  out += fmt::format("static const struct step_arg step_args[] = {{\n{}}};\n", args);
  out += fmt::format("static const int step_first_arg[] = {{{}}};\n", first_arg);
  out += fmt::format("static const int64_t step_repeat[] = {{{}}};", repeats.empty() ? "1" : repeats);
  return out;
}

std::string c_source_text(const std::string& name, const Program& p, const MemoryPlan& plan, const Tensors& weights,
                          const std::vector<std::string>& entries, uint64_t fingerprint) {
  return c_source::instantiate(library_c::kSource, name, {{"TABLES", tables(p, plan, weights, entries, fingerprint)}});
}

}  // namespace

StatusOr<BuiltModel> build_model(Graph graph, const std::string& name, const Target& target, const KernelChooser& choose) {
  TF_RETURN_IF_ERROR(check_library_name(name));
  if (target.kind != Target::Kind::kLLVM)
    return unimplemented(fmt::format("models are built for CPU targets; '{}' is not one", target.to_string()));
  if (graph.inputs.empty() || graph.outputs.empty()) return invalid_argument("the model has no inputs or no outputs");
  TF_RETURN_IF_ERROR(run_passes(graph));
  TF_ASSIGN_OR_RETURN(Program program, lower_graph(graph));
  // Each tuned workload's kernel, chosen once. Where the chooser answers with a record of another
  // form of the workload (a dense layer's from before weights were packed at build time, a
  // convolution's Winograd form), the nodes are lowered again to that form.
  std::map<std::string, ChosenKernel> chosen_of;
  WorkloadForms forms;
  for (const Step& step : program.steps) {
    if (!step.workload || chosen_of.count(step.workload->to_string())) continue;
    TF_ASSIGN_OR_RETURN(ChosenKernel chosen, choose(*step.workload));
    std::string key = step.workload->to_string();
    if (chosen.workload && !(*chosen.workload == *step.workload)) {
      std::optional<Workload> winograd = winograd_form(*step.workload);
      if (!(*chosen.workload == operators::without_weight_panels(*step.workload)) &&
          !(winograd && *chosen.workload == *winograd))
        return internal_error(fmt::format("the kernel chosen for {} is of {}", key, chosen.workload->to_string()));
      forms[key] = *chosen.workload;
      chosen_of[chosen.workload->to_string()] = chosen;
    }
    chosen_of[key] = std::move(chosen);
  }
  if (!forms.empty()) {
    TF_ASSIGN_OR_RETURN(program, lower_graph(std::move(graph), forms));
  }
  MemoryPlan plan = plan_memory(program);
  Tensors weights = collect_weights(program);

  BuiltModel built;
  LibraryObjects parts;
  std::vector<std::string> entries;
  std::map<std::string, std::string> entry_of_workload;
  json kernels = json::array();
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const Step& step = program.steps[s];
    std::string entry = fmt::format("{}__step_{}", name, s);
    if (step.workload) {
      std::string key = step.workload->to_string();
      if (auto it = entry_of_workload.find(key); it != entry_of_workload.end()) {
        entries.push_back(it->second);
        continue;
      }
      const ChosenKernel& chosen = chosen_of.at(key);
      Config config = as_built(*step.workload, chosen.config);
      auto object = build_kernel_object(*step.workload, target, config, entry);
      if (!object.ok()) return object.status().with_context(fmt::format("node '{}' ({})", step.node, key));
      parts.objects.push_back(std::move(*object));
      json k = {{"workload", key}, {"node", step.node}, {"source", chosen.tuned ? "tuned" : "default"},
                {"config", json::parse(config.to_json())}};
      if (!(config == chosen.config)) k["chosen_config"] = json::parse(chosen.config.to_json());
      if (chosen.tuned) {
        k["gflops"] = chosen.gflops;
        k["time_s"] = chosen.time_s;
        k["device_key"] = chosen.device_key;
        k["record"] = json::parse(chosen.record_json);
      } else {
        built.warnings.push_back(fmt::format("no record of {}: built from the template's default config", key));
      }
      kernels.push_back(std::move(k));
      entry_of_workload[key] = entry;
    } else {
      auto object = build_compute_object(step.compute, target, entry, step.vectorize, parallel_pays(step.compute));
      if (!object.ok()) return object.status().with_context(fmt::format("node '{}' ({})", step.node, step.op));
      parts.objects.push_back(std::move(*object));
    }
    parts.private_symbols.push_back(entry);
    entries.push_back(entry);
  }

  std::string header(kWeightsHeaderBytes, '\0');
  uint64_t fingerprint = fnv1a(weights.weights), bytes = weights.weights.size();
  std::memcpy(header.data(), kWeightsMagic, 8);
  std::memcpy(header.data() + 8, &kWeightsVersion, 8);
  std::memcpy(header.data() + 16, &fingerprint, 8);
  std::memcpy(header.data() + 24, &bytes, 8);

  parts.header = header_text(name, target, program.graph);
  parts.c_source = c_source_text(name, program, plan, weights, entries, fingerprint);
  TF_ASSIGN_OR_RETURN(built.files, link_cpu_library(name, target, parts));
  built.files.insert(built.files.begin(), LibraryFile{name + ".h", parts.header});
  built.files.push_back({name + ".weights", header + weights.weights});
  json io = json::object();
  for (const auto* list : {&program.graph.inputs, &program.graph.outputs}) {
    json entries_json = json::array();
    for (const auto& v : *list)
      entries_json.push_back({{"name", v}, {"dtype", program.graph.find(v)->dtype}, {"shape", program.graph.find(v)->shape}});
    io[list == &program.graph.inputs ? "inputs" : "outputs"] = std::move(entries_json);
  }
  json manifest = {{"name", name},
                   {"target", target.to_string()},
                   {"header", name + ".h"},
                   {"shared_library", "lib" + name + ".so"},
                   {"static_library", "lib" + name + ".a"},
                   {"weights", name + ".weights"},
                   {"inputs", io["inputs"]},
                   {"outputs", io["outputs"]},
                   {"steps", program.steps.size()},
                   {"memory", {{"arena_bytes", plan.arena_bytes}, {"naive_bytes", plan.naive_bytes},
                               {"weights_bytes", weights.weights.size()}}},
                   {"kernels", std::move(kernels)}};
  built.files.push_back({"manifest.json", manifest.dump(2) + "\n"});
  built.arena_bytes = plan.arena_bytes;
  built.naive_bytes = plan.naive_bytes;
  built.steps = static_cast<int>(program.steps.size());
  return built;
}

}  // namespace tunefarm::model
