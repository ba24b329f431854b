#include "model/build.h"

#include <cctype>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/build.h"
#include "model/passes/passes.h"
#include "model/program.h"
#include "model/tasks.h"

namespace tunefarm::model {
namespace {

using json = nlohmann::ordered_json;

constexpr int64_t kAlignment = 64;
// "TFWEIGHT", a format version, the fingerprint of the data and its size, then the data.
constexpr char kWeightsMagic[8] = {'T', 'F', 'W', 'E', 'I', 'G', 'H', 'T'};
constexpr uint64_t kWeightsVersion = 1;
constexpr int64_t kWeightsHeaderBytes = 64;

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

uint64_t fnv1a(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A string as a C literal (names come from the model file: anything may be in them).
std::string c_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += fmt::format("\\{}", static_cast<char>(c));
    else if (c < 0x20 || c >= 0x7f) out += fmt::format("\\{:03o}", c);
    else out += static_cast<char>(c);
  }
  return out + "\"";
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
  std::string E = upper(name);
  std::string io;
  for (const auto* list : {&g.inputs, &g.outputs})
    for (const auto& v : *list)
      io += fmt::format(" *   {} {}: float32{}\n", list == &g.inputs ? "input " : "output", v, shape_string(g.find(v)->shape));
  return fmt::format(R"src(/* {0}.h: a model built by tunefarm (`tune-client build --model`) for target '{1}'.
 *
{3} *
 * Link with lib{0}.so (or lib{0}.a plus -lstdc++ -lpthread -lm). Create an instance from the
 * weights file built with the library ({0}.weights), run it as often as needed, destroy it.
 * Tensors are dense float32 arrays, row-major, in the model's shapes. Every function that can
 * fail returns {2}_OK (0) or an error code; {0}_last_error() says what went wrong on this thread.
 * One instance runs one inference at a time; use one instance per thread to run several.
 */
#ifndef {2}_H_
#define {2}_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {{
#endif

enum {{
  {2}_OK = 0,
  {2}_ERROR_NULL_ARGUMENT = 1,    /* a pointer argument is NULL */
  {2}_ERROR_OUT_OF_MEMORY = 2,    /* the arena, the weights or a kernel's scratch memory */
  {2}_ERROR_INVALID_ARGUMENT = 3, /* e.g. a negative thread count */
  {2}_ERROR_WEIGHTS = 4,          /* the weights file is missing, unreadable or not this library's */
  {2}_ERROR_SHAPE = 5             /* an input or output buffer has the wrong number of elements */
}};

typedef struct {0}_model {0}_model;

/* Reads and checks the weights file; *out is the new instance. */
int {0}_create(const char* weights_path, {0}_model** out);
void {0}_destroy({0}_model* model);

/* Runs the model: inputs[i] and outputs[i] hold input_elements[i] and output_elements[i] floats,
 * which must be the model's sizes (see the shapes above and the functions below). */
int {0}_run({0}_model* model, const float* const* inputs, const int64_t* input_elements, float* const* outputs,
            const int64_t* output_elements);
/* The same, adding each step's seconds to step_seconds[0 .. {0}_num_steps() - 1]. */
int {0}_run_profiled({0}_model* model, const float* const* inputs, const int64_t* input_elements,
                     float* const* outputs, const int64_t* output_elements, double* step_seconds);

/* Threads the kernels use, the calling thread included; 0 restores the default
 * ($TUNEFARM_NUM_THREADS, else the CPUs this process may run on). */
int {0}_set_num_threads(int num_threads);

const char* {0}_last_error(void);
const char* {0}_error_string(int code);

int {0}_num_inputs(void);
int {0}_num_outputs(void);
const char* {0}_input_name(int i);
const char* {0}_output_name(int i);
int {0}_input_rank(int i);
int {0}_output_rank(int i);
const int64_t* {0}_input_shape(int i);
const int64_t* {0}_output_shape(int i);
int {0}_num_steps(void);
const char* {0}_step_name(int i);  /* "node (operator)" */

#ifdef __cplusplus
}}  /* extern "C" */
#endif

#endif /* {2}_H_ */
)src",
                     name, target.to_string(), E, io);
}

std::string io_tables(const std::string& prefix, const Graph& g, const std::vector<std::string>& list) {
  std::string names, ranks, shapes, pointers;
  for (size_t i = 0; i < list.size(); ++i) {
    const Value* v = g.find(list[i]);
    names += c_string(list[i]) + ", ";
    ranks += fmt::format("{}, ", std::max<size_t>(1, v->shape.size()));
    shapes += fmt::format("static const int64_t {}_shape_{}[] = {{{}}};\n", prefix, i, shape_array(v->shape));
    pointers += fmt::format("{}_shape_{}, ", prefix, i);
  }
  if (list.empty()) names = ranks = pointers = "0";
  return fmt::format("{}static const char* const {}_names[] = {{{}}};\nstatic const int {}_ranks[] = {{{}}};\n"
                     "static const int64_t* const {}_shapes[] = {{{}}};\nstatic const int64_t {}_sizes[] = {{{}}};\n",
                     shapes, prefix, names, prefix, ranks, prefix, pointers, prefix,
                     [&] {
                       std::string e;
                       for (const auto& n : list) e += fmt::format("{}, ", std::max<int64_t>(1, g.find(n)->elements()));
                       return e.empty() ? std::string("0") : e;
                     }());
}

std::string c_source(const std::string& name, const Program& p, const MemoryPlan& plan, const Tensors& weights,
                     const std::vector<std::string>& entries, uint64_t fingerprint) {
  const Graph& g = p.graph;
  std::string E = upper(name);
  std::string out = fmt::format(R"src(/* lib{0}: runs the model's kernels in order over one arena. Generated by tunefarm. */
#define _POSIX_C_SOURCE 200809L  /* clock_gettime */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "{0}.h"
#include "compiler/runtime/kernel_runtime.h"

struct {0}_model {{
  unsigned char* weights;
  unsigned char* arena;
}};

static _Thread_local char last_error[512];

static int fail(int code, const char* format, ...) {{
  va_list args;
  va_start(args, format);
  vsnprintf(last_error, sizeof last_error, format, args);
  va_end(args);
  return code;
}}

const char* {0}_last_error(void) {{ return last_error; }}

const char* {0}_error_string(int code) {{
  switch (code) {{
    case {1}_OK: return "ok";
    case {1}_ERROR_NULL_ARGUMENT: return "a pointer argument is NULL";
    case {1}_ERROR_OUT_OF_MEMORY: return "out of memory";
    case {1}_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case {1}_ERROR_WEIGHTS: return "the weights file is missing, unreadable or not this library's";
    case {1}_ERROR_SHAPE: return "a buffer has the wrong number of elements";
  }}
  return "unknown error code";
}}

int {0}_set_num_threads(int num_threads) {{
  if (num_threads < 0) return fail({1}_ERROR_INVALID_ARGUMENT, "thread count %d is negative", num_threads);
  tunefarm_runtime_set_num_threads(num_threads);
  return {1}_OK;
}}

enum {{ NUM_INPUTS = {2}, NUM_OUTPUTS = {3}, NUM_STEPS = {4} }};
static const uint64_t kFingerprint = {5}ull;
static const int64_t kWeightsBytes = {6};
static const int64_t kArenaBytes = {7};
)src",
                                name, E, g.inputs.size(), g.outputs.size(), p.steps.size(), fingerprint, weights.weights.size(),
                                std::max<int64_t>(plan.arena_bytes, 64));
  out += io_tables("input", g, g.inputs) + io_tables("output", g, g.outputs);
  std::string step_names;
  for (const Step& s : p.steps) step_names += c_string(fmt::format("{} ({})", s.node, s.op)) + ",\n  ";
  out += fmt::format("static const char* const step_names[] = {{\n  {}}};\n", step_names);
  out += fmt::format(R"src(
int {0}_num_inputs(void) {{ return NUM_INPUTS; }}
int {0}_num_outputs(void) {{ return NUM_OUTPUTS; }}
const char* {0}_input_name(int i) {{ return i >= 0 && i < NUM_INPUTS ? input_names[i] : NULL; }}
const char* {0}_output_name(int i) {{ return i >= 0 && i < NUM_OUTPUTS ? output_names[i] : NULL; }}
int {0}_input_rank(int i) {{ return i >= 0 && i < NUM_INPUTS ? input_ranks[i] : -1; }}
int {0}_output_rank(int i) {{ return i >= 0 && i < NUM_OUTPUTS ? output_ranks[i] : -1; }}
const int64_t* {0}_input_shape(int i) {{ return i >= 0 && i < NUM_INPUTS ? input_shapes[i] : NULL; }}
const int64_t* {0}_output_shape(int i) {{ return i >= 0 && i < NUM_OUTPUTS ? output_shapes[i] : NULL; }}
int {0}_num_steps(void) {{ return NUM_STEPS; }}
const char* {0}_step_name(int i) {{ return i >= 0 && i < NUM_STEPS ? step_names[i] : NULL; }}

void {0}_destroy({0}_model* model) {{
  if (!model) return;
  free(model->weights);
  free(model->arena);
  free(model);
}}

static uint64_t fnv1a(const unsigned char* p, int64_t n) {{
  uint64_t h = 1469598103934665603ull;
  for (int64_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}}

int {0}_create(const char* weights_path, {0}_model** out) {{
  if (!weights_path || !out) return fail({1}_ERROR_NULL_ARGUMENT, "weights_path and out must not be NULL");
  *out = NULL;
  FILE* f = fopen(weights_path, "rb");
  if (!f) return fail({1}_ERROR_WEIGHTS, "cannot open the weights file %s", weights_path);
  unsigned char header[{2}];
  if (fread(header, 1, sizeof header, f) != sizeof header || memcmp(header, "TFWEIGHT", 8) != 0) {{
    fclose(f);
    return fail({1}_ERROR_WEIGHTS, "%s is not a tunefarm weights file", weights_path);
  }}
  uint64_t version, fingerprint, bytes;
  memcpy(&version, header + 8, 8);
  memcpy(&fingerprint, header + 16, 8);
  memcpy(&bytes, header + 24, 8);
  if (version != {3} || fingerprint != kFingerprint || (int64_t)bytes != kWeightsBytes) {{
    fclose(f);
    return fail({1}_ERROR_WEIGHTS, "%s belongs to another build (fingerprint %016llx, this library's %016llx)",
                weights_path, (unsigned long long)fingerprint, (unsigned long long)kFingerprint);
  }}
  {0}_model* m = calloc(1, sizeof *m);
  if (m) m->weights = aligned_alloc(64, (size_t)((kWeightsBytes + 63) / 64 * 64 + 64));
  if (m) m->arena = aligned_alloc(64, (size_t)((kArenaBytes + 63) / 64 * 64));
  if (!m || !m->weights || !m->arena) {{
    fclose(f);
    {0}_destroy(m);
    return fail({1}_ERROR_OUT_OF_MEMORY, "cannot allocate %lld bytes of weights and %lld of arena",
                (long long)kWeightsBytes, (long long)kArenaBytes);
  }}
  size_t got = fread(m->weights, 1, (size_t)kWeightsBytes, f);
  int extra = fgetc(f);
  fclose(f);
  if ((int64_t)got != kWeightsBytes || extra != EOF || fnv1a(m->weights, kWeightsBytes) != kFingerprint) {{
    {0}_destroy(m);
    return fail({1}_ERROR_WEIGHTS, "%s is damaged: its data does not match its header", weights_path);
  }}
  *out = m;
  return {1}_OK;
}}

static double now(void) {{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}}
)src",
                     name, E, kWeightsHeaderBytes, kWeightsVersion);
  for (const auto& entry : std::set<std::string>(entries.begin(), entries.end()))
    out += fmt::format("int32_t {}(void* const* args);\n", entry);
  out += fmt::format(R"src(
int {0}_run_profiled({0}_model* m, const float* const* inputs, const int64_t* input_elements, float* const* outputs,
                     const int64_t* output_elements, double* step_seconds) {{
  if (!m || !inputs || !input_elements || !outputs || !output_elements)
    return fail({1}_ERROR_NULL_ARGUMENT, "the model, the buffers and their sizes must not be NULL");
  for (int i = 0; i < NUM_INPUTS; ++i) {{
    if (!inputs[i]) return fail({1}_ERROR_NULL_ARGUMENT, "input %d (%s) is NULL", i, input_names[i]);
    if (input_elements[i] != input_sizes[i])
      return fail({1}_ERROR_SHAPE, "input %d (%s) has %lld elements; the model takes %lld", i, input_names[i],
                  (long long)input_elements[i], (long long)input_sizes[i]);
  }}
  for (int i = 0; i < NUM_OUTPUTS; ++i) {{
    if (!outputs[i]) return fail({1}_ERROR_NULL_ARGUMENT, "output %d (%s) is NULL", i, output_names[i]);
    if (output_elements[i] != output_sizes[i])
      return fail({1}_ERROR_SHAPE, "output %d (%s) has room for %lld elements; the model writes %lld", i,
                  output_names[i], (long long)output_elements[i], (long long)output_sizes[i]);
  }}
  unsigned char* w = m->weights;
  unsigned char* a = m->arena;
  (void)w;
  (void)a;
  double start = step_seconds ? now() : 0;
)src",
                     name, E);
  // Where each value lives: the caller's buffers, the weights or the arena.
  auto pointer = [&](const std::string& value) -> std::string {
    const std::string& root = p.storage(value);
    for (size_t i = 0; i < g.inputs.size(); ++i)
      if (g.inputs[i] == root) return fmt::format("(void*)inputs[{}]", i);
    for (size_t i = 0; i < g.outputs.size(); ++i)
      if (g.outputs[i] == root) return fmt::format("(void*)outputs[{}]", i);
    if (auto it = weights.weight_offsets.find(root); it != weights.weight_offsets.end()) return fmt::format("(void*)(w + {})", it->second);
    return fmt::format("(void*)(a + {})", plan.offsets.at(root));
  };
  for (size_t s = 0; s < p.steps.size(); ++s) {
    std::string args;
    for (const auto& t : p.steps[s].tensors) args += pointer(t) + ", ";
    out += fmt::format(R"src(  {{
    void* args[] = {{{}}};
    if ({}(args) != 0) return fail({}_ERROR_OUT_OF_MEMORY, "step {} (%s) ran out of scratch memory", step_names[{}]);
    if (step_seconds) {{
      double t = now();
      step_seconds[{}] += t - start;
      start = t;
    }}
  }}
)src",
                       args, entries[s], E, s, s, s);
  }
  out += fmt::format(R"src(  return {1}_OK;
}}

int {0}_run({0}_model* m, const float* const* inputs, const int64_t* input_elements, float* const* outputs,
            const int64_t* output_elements) {{
  return {0}_run_profiled(m, inputs, input_elements, outputs, output_elements, NULL);
}}
)src",
                     name, E);
  return out;
}

}  // namespace

StatusOr<BuiltModel> build_model(Graph graph, const std::string& name, const Target& target, const KernelChooser& choose) {
  TF_RETURN_IF_ERROR(check_library_name(name));
  if (target.kind != Target::Kind::kLLVM)
    return unimplemented(fmt::format("models are built for CPU targets; '{}' is not one", target.to_string()));
  if (graph.inputs.empty() || graph.outputs.empty()) return invalid_argument("the model has no inputs or no outputs");
  TF_RETURN_IF_ERROR(run_passes(graph));
  TF_ASSIGN_OR_RETURN(Program program, lower_graph(std::move(graph)));
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
      TF_ASSIGN_OR_RETURN(ChosenKernel chosen, choose(*step.workload));
      Config config = with_outer_parallelism(chosen.config);
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
      auto object = build_compute_object(step.compute, target, entry, step.vectorize);
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
  parts.c_source = c_source(name, program, plan, weights, entries, fingerprint);
  TF_ASSIGN_OR_RETURN(built.files, link_cpu_library(name, target, parts));
  built.files.insert(built.files.begin(), LibraryFile{name + ".h", parts.header});
  built.files.push_back({name + ".weights", header + weights.weights});
  json io = json::object();
  for (const auto* list : {&program.graph.inputs, &program.graph.outputs}) {
    json entries_json = json::array();
    for (const auto& v : *list) entries_json.push_back({{"name", v}, {"shape", program.graph.find(v)->shape}});
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
