// The model build: the small generated models become libraries that load their weights, run, and
// refuse what is wrong (a weights file of another build, buffers of the wrong size); the memory
// plan reuses space. Whether the outputs are right is checked against ONNX Runtime by
// tests/model/check_against_onnxruntime.py, on the libraries this test leaves behind.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/helper_program.h"
#include "common/operators/operator.h"
#include "compiler/build.h"
#include "compiler/ir/printer.h"
#include "model/build.h"
#include "model/onnx_import.h"
#include "model/passes/passes.h"
#include "model/program.h"
#include "model_test_util.h"
#include "tests/disassembly.h"
#include "tests/support/scratch.h"

namespace tunefarm::model {
namespace {

using testing::ModelBuilder;
using testing::test_model;

StatusOr<ChosenKernel> defaults(const Workload& w) {
  TF_ASSIGN_OR_RETURN(Config c, default_config(w, Target{}));
  ChosenKernel chosen;
  chosen.config = c;
  return chosen;
}

// A built model loaded with dlopen, its functions bound by name.
class Loaded {
 public:
  Loaded(const std::string& dir, const std::string& name) : name_(name) {
    handle_ = dlopen(fmt::format("{}/lib{}.so", dir, name).c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(handle_, nullptr) << dlerror();
  }
  ~Loaded() {
    if (handle_) dlclose(handle_);
  }
  template <typename F>
  F fn(const std::string& suffix) const {
    return handle_ ? reinterpret_cast<F>(dlsym(handle_, (name_ + "_" + suffix).c_str())) : nullptr;
  }

 private:
  std::string name_;
  void* handle_ = nullptr;
};

struct Built {
  std::string dir;
  BuiltModel model;
};

Built build(const std::string& file, const std::string& name, const ImportOptions& options = {}) {
  auto graph = import_onnx_file(test_model(file), options);
  EXPECT_TRUE(graph.ok()) << graph.status().to_string();
  Built b;
  b.dir = tunefarm::testing::scratch_dir() + "/model_build_test/" + name;
  // A test that builds twice under one name starts from an empty directory.
  std::filesystem::remove_all(b.dir);
  std::filesystem::create_directories(b.dir);
  auto model = build_model(*graph, name, Target{}, defaults);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  if (!model.ok()) return b;
  b.model = *model;
  for (const auto& f : b.model.files) std::ofstream(b.dir + "/" + f.name, std::ios::binary) << f.content;
  return b;
}

using Create = int (*)(const char*, void**);
using Run = int (*)(void*, const void* const*, const int64_t*, float* const*, const int64_t*);
using Destroy = void (*)(void*);
using LastError = const char* (*)();

// The model built into `dir` as `name` run over `in` on one thread, then on two: out[0], out[1].
void run_on_one_and_two_threads(const std::string& dir, const std::string& name, const std::vector<float>& in,
                                int64_t out_n, std::vector<float> out[2]) {
  Loaded lib(dir, name);
  auto create = lib.fn<Create>("create");
  auto run = lib.fn<model::Run>("run");
  auto destroy = lib.fn<Destroy>("destroy");
  auto last_error = lib.fn<LastError>("last_error");
  auto set_num_threads = lib.fn<int (*)(int)>("set_num_threads");
  ASSERT_TRUE(create && run && destroy && last_error && set_num_threads);
  void* model = nullptr;
  ASSERT_EQ(create(fmt::format("{}/{}.weights", dir, name).c_str(), &model), 0) << last_error();
  int64_t in_n = static_cast<int64_t>(in.size());
  for (int threads : {1, 2}) {
    ASSERT_EQ(set_num_threads(threads), 0) << last_error();
    out[threads - 1].assign(static_cast<size_t>(out_n), NAN);
    const void* ins[] = {in.data()};
    float* outs[] = {out[threads - 1].data()};
    ASSERT_EQ(run(model, ins, &in_n, outs, &out_n), 0) << last_error();
  }
  destroy(model);
}

// The outputs against ONNX Runtime's on the same inputs (bench/model_bench.py --check), within
// `tolerance` of the output's scale; `file` is a test model's name or a path.
void matches_onnxruntime(const std::string& file, const std::string& dir, const std::string& tolerance = "1e-3") {
  std::string python = TUNEFARM_VENV_PYTHON;
  ASSERT_TRUE(std::filesystem::exists(python)) << python << " is missing: deploy/install-deps.sh makes it (make test runs it)";
  auto run = run_helper({python, std::string(TUNEFARM_SOURCE_DIR) + "/bench/model_bench.py", "--check", "--model",
                         file.starts_with("/") ? file : test_model(file), "--artifact", dir, "--tolerance", tolerance},
                        "", std::chrono::minutes(5));
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  EXPECT_EQ(run->exit_code, 0) << run->out << run->err;
  EXPECT_NE(run->out.find("max_relative_difference"), std::string::npos) << run->out << run->err;
}

// Builds an imported model untuned as library `name` and writes its files into `dir`.
void build_into(const Graph& graph, const std::string& name, const std::string& dir) {
  std::filesystem::create_directories(dir);
  auto model = build_model(graph, name, Target{}, defaults);
  ASSERT_TRUE(model.ok()) << dir << ": " << model.status().to_string();
  for (const auto& f : model->files) std::ofstream(dir + "/" + f.name, std::ios::binary) << f.content;
}

// Builds an imported model untuned into `out` and runs it beside ONNX Runtime (within 1e-4).
void builds_and_matches(const Graph& graph, const std::string& file, const std::string& out) {
  ASSERT_NO_FATAL_FAILURE(build_into(graph, "m", out)) << file;
  matches_onnxruntime(file, out, "1e-4");
}

void runs_and_refuses_bad_input(const std::string& file, const std::string& name, const ImportOptions& options = {}) {
  Built b = build(file, name, options);
  ASSERT_FALSE(b.model.files.empty());
  matches_onnxruntime(file, b.dir);
  EXPECT_GT(b.model.naive_bytes, b.model.arena_bytes) << "the plan shares space";
  EXPECT_GT(b.model.arena_bytes, 0);
  EXPECT_FALSE(b.model.warnings.empty()) << "nothing was tuned, and the build says so";
  Loaded lib(b.dir, name);
  auto create = lib.fn<Create>("create");
  auto run = lib.fn<Run>("run");
  auto destroy = lib.fn<Destroy>("destroy");
  auto last_error = lib.fn<LastError>("last_error");
  auto input_shape = lib.fn<const int64_t* (*)(int)>("input_shape");
  auto input_rank = lib.fn<int (*)(int)>("input_rank");
  auto output_shape = lib.fn<const int64_t* (*)(int)>("output_shape");
  auto output_rank = lib.fn<int (*)(int)>("output_rank");
  ASSERT_TRUE(create && run && destroy && last_error && input_shape && output_shape);
  void* m = nullptr;
  ASSERT_EQ(create((b.dir + "/" + name + ".weights").c_str(), &m), 0) << last_error();
  auto elements = [](const int64_t* shape, int rank) {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= shape[i];
    return n;
  };
  int64_t in_n = elements(input_shape(0), input_rank(0)), out_n = elements(output_shape(0), output_rank(0));
  std::vector<float> in(static_cast<size_t>(in_n)), out(static_cast<size_t>(out_n), NAN);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(0.1f * static_cast<float>(i));
  const void* ins[] = {in.data()};
  float* outs[] = {out.data()};
  ASSERT_EQ(run(m, ins, &in_n, outs, &out_n), 0) << last_error();
  for (float v : out) ASSERT_TRUE(std::isfinite(v));
  // Wrong sizes are refused with the input's name; nothing is written.
  int64_t wrong = in_n - 1;
  EXPECT_EQ(run(m, ins, &wrong, outs, &out_n), 5);
  EXPECT_NE(std::string(last_error()).find("elements"), std::string::npos) << last_error();
  destroy(m);

  // A weights file that is not this build's: another file, a truncated one.
  void* other = nullptr;
  std::string bogus = b.dir + "/bogus.weights";
  std::ofstream(bogus) << "not weights";
  EXPECT_EQ(create(bogus.c_str(), &other), 4);
  EXPECT_EQ(other, nullptr);
  std::string cut = b.dir + "/cut.weights";
  std::filesystem::copy_file(b.dir + "/" + name + ".weights", cut, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) - 4);
  EXPECT_EQ(create(cut.c_str(), &other), 4);
  EXPECT_NE(std::string(last_error()).find("cut.weights"), std::string::npos) << last_error();
  EXPECT_EQ(create((b.dir + "/missing.weights").c_str(), &other), 4);
}

TEST(ModelBuild, SmallResNetRunsAndRefusesBadInput) { runs_and_refuses_bad_input("resnet50_small.onnx", "resnet_small"); }

TEST(ModelBuild, SmallMobileNetRunsAndRefusesBadInput) {
  runs_and_refuses_bad_input("mobilenet_v2_small.onnx", "mobilenet_small");
}

TEST(ModelBuild, SmallBertLayerRunsAndRefusesBadInput) {
  ImportOptions options;
  options.input_shapes["hidden_states"] = {1, 16, 64};
  runs_and_refuses_bad_input("bert_layer_small.onnx", "bert_small", options);
}

// Transformer layers in the shapes of models nobody here tuned for, small: a ViT block (pre-norm,
// packed Q/K/V split by Reshape/Transpose/Gather, scores scaled by Mul, an odd token count) and a
// MiniLM-style layer (post-norm, an int64 attention mask made additive), within 1e-4 of ONNX
// Runtime's outputs.
TEST(ModelBuild, SmallVitBlockRunsAndRefusesBadInput) { runs_and_refuses_bad_input("vit_block_small.onnx", "vit_small"); }

TEST(ModelBuild, SmallVitAndMiniLmLayersMatchOnnxRuntime) {
  for (const char* name : {"vit_block_small", "minilm_layer_small"}) {
    Built b = build(std::string(name) + ".onnx", name);
    ASSERT_FALSE(b.model.files.empty()) << name;
    matches_onnxruntime(std::string(name) + ".onnx", b.dir, "1e-4");
  }
}

// A Transpose's attributes come from the file too: one that names a selected axis or index out of
// range, or whose output is not its input permuted, is refused by name; none reads outside its
// input. (The passes write select_axis and select_index when they compose a Gather into it.)
TEST(ModelBuild, TransposesWhoseAttributesDoNotFitTheirInputAreRefused) {
  auto transpose = [](std::vector<int64_t> out, std::map<std::string, std::vector<int64_t>> attrs) {
    Graph g;
    for (auto [name, shape] : {std::pair<std::string, std::vector<int64_t>>{"x", {2, 3, 4}}, {"y", out}}) {
      g.values[name].name = name;
      g.values[name].shape = shape;
    }
    Node n;
    n.name = "t";
    n.op = "Transpose";
    n.inputs = {"x"};
    n.outputs = {"y"};
    for (auto& [key, v] : attrs) {
      if (key == "perm") n.attributes[key].ints = v;
      else n.attributes[key].i = v.at(0);
    }
    g.nodes = {n};
    g.inputs = {"x"};
    g.outputs = {"y"};
    return lower_graph(g).status();
  };
  EXPECT_TRUE(transpose({4, 2, 3}, {{"perm", {2, 0, 1}}}).ok());
  EXPECT_TRUE(transpose({4, 2}, {{"perm", {1, 0}}, {"select_axis", {1}}, {"select_index", {2}}}).ok());
  for (auto [out, attrs] : std::vector<std::pair<std::vector<int64_t>, std::map<std::string, std::vector<int64_t>>>>{
           {{4, 2}, {{"perm", {1, 0}}, {"select_axis", {1}}, {"select_index", {3}}}},  // index past the axis
           {{4, 2}, {{"perm", {1, 0}}, {"select_axis", {1}}, {"select_index", {-1}}}},
           {{4, 2}, {{"perm", {1, 0}}, {"select_axis", {3}}}},                          // no axis 3
           {{4, 3}, {{"perm", {1, 0}}, {"select_axis", {1}}}},                          // shape not permuted
           {{9, 2, 3}, {{"perm", {2, 0, 1}}}},
           {{4, 2, 3}, {{"perm", {2, 2, 1}}}}}) {
    Status s = transpose(out, attrs);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("node 't'"), std::string::npos) << s.message();
  }
}

// Parameters whose sizes do not fit the tensor they apply to (files no exporter writes, which shape
// inference lets through) are refused naming the node, not read past their end: PRelu's slope
// that does not broadcast, InstanceNormalization's scale and a ConvTranspose's bias of the wrong
// channel count, a LayerNormalization's or RMSNormalization's scale of another length than the row,
// a Conv's weight of more input channels than its input has (ONNX Runtime refuses those when it
// runs); and a value of more elements than any memory holds.
TEST(ModelBuild, ParametersThatDoNotFitTheirTensorAreRefused) {
  auto lowered = [](const std::string& op, std::vector<std::pair<std::string, std::vector<int64_t>>> constants,
                    std::vector<int64_t> out, std::map<std::string, std::vector<int64_t>> attrs = {}) {
    Graph g;
    g.values["x"].name = "x";
    g.values["x"].shape = {1, 4, 8, 8};
    g.values["y"].name = "y";
    g.values["y"].shape = out;
    Node n;
    n.name = "bad";
    n.op = op;
    n.inputs = {"x"};
    n.outputs = {"y"};
    for (auto& [name, shape] : constants) {
      Value& v = g.values[name];
      v.name = name;
      v.shape = shape;
      v.constant = true;
      v.floats.assign(static_cast<size_t>(v.elements()), 0.5f);
      n.inputs.push_back(name);
    }
    for (auto& [key, v] : attrs) n.attributes[key].ints = v;
    g.nodes = {n};
    g.inputs = {"x"};
    g.outputs = {"y"};
    return lower_graph(g).status();
  };
  EXPECT_TRUE(lowered("PRelu", {{"slope", {4, 1, 1}}}, {1, 4, 8, 8}).ok());
  EXPECT_TRUE(lowered("InstanceNormalization", {{"scale", {4}}, {"bias", {4}}}, {1, 4, 8, 8}).ok());
  std::map<std::string, std::vector<int64_t>> up = {{"kernel_shape", {4, 4}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}};
  EXPECT_TRUE(lowered("ConvTranspose", {{"w", {4, 2, 4, 4}}, {"b", {2}}}, {1, 2, 16, 16}, up).ok());
  EXPECT_TRUE(lowered("LayerNormalization", {{"scale", {8}}, {"bias", {8}}}, {1, 4, 8, 8}).ok());
  EXPECT_TRUE(lowered("RMSNormalization", {{"scale", {8}}}, {1, 4, 8, 8}).ok());
  EXPECT_TRUE(lowered("Conv", {{"w", {8, 4, 1, 1}}}, {1, 8, 8, 8}).ok());
  for (Status s : {lowered("PRelu", {{"slope", {3}}}, {1, 4, 8, 8}),
                   lowered("Conv", {{"w", {8, 6, 1, 1}}}, {1, 8, 8, 8}),
                   lowered("LayerNormalization", {{"scale", {7}}, {"bias", {8}}}, {1, 4, 8, 8}),
                   lowered("RMSNormalization", {{"scale", {7}}}, {1, 4, 8, 8}),
                   lowered("InstanceNormalization", {{"scale", {3}}, {"bias", {3}}}, {1, 4, 8, 8}),
                   lowered("ConvTranspose", {{"w", {4, 2, 4, 4}}, {"b", {1}}}, {1, 2, 16, 16}, up)}) {
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("node 'bad'"), std::string::npos) << s.message();
  }
  // A shape past any memory (a Resize by 1e9 that shape inference computed) is refused by name.
  Status huge = lowered("Relu", {}, {1, 4, 100000, 100000});
  EXPECT_FALSE(huge.ok());
  EXPECT_NE(huge.message().find("value 'y'"), std::string::npos) << huge.message();
}

// A dense layer's constant weight is packed once, when the model is built, into the column panels
// its workload names (w_block): the step reads a constant of that layout and its kernel has no
// packing stage. Outputs within 1e-4 of ONNX Runtime's.
TEST(ModelBuild, DenseWeightsArePackedOnceAtBuildTime) {
  ImportOptions options;
  options.input_shapes["hidden_states"] = {1, 16, 64};
  auto graph = import_onnx_file(test_model("bert_layer_small.onnx"), options);
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  Graph g = *graph;
  ASSERT_TRUE(run_passes(g).ok());
  auto program = lower_graph(g);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  int dense = 0;
  for (const Step& step : program->steps) {
    if (!step.workload || step.workload->op != "dense") continue;
    ++dense;
    int64_t wb = step.workload->param("w_block"), n = step.workload->param("N"), k = step.workload->param("K");
    ASSERT_GT(wb, 0) << step.workload->to_string();
    const Value* w = program->graph.find(step.tensors[1]);
    ASSERT_NE(w, nullptr) << step.tensors[1];
    EXPECT_TRUE(w->constant);
    EXPECT_EQ(w->shape, (std::vector<int64_t>{(n + wb - 1) / wb, k, wb})) << step.tensors[1];
    // MatMul's [K, N] weight: column j of row i lands in panel j / wb at (i, j % wb).
    const Value* from = program->graph.find(step.tensors[1].substr(0, step.tensors[1].find('/')));
    ASSERT_NE(from, nullptr);
    int64_t i = k - 1, j = n - 1;
    EXPECT_EQ(w->floats[static_cast<size_t>((j / wb * k + i) * wb + j % wb)],
              from->floats[static_cast<size_t>(i * n + j)]);
    auto f = lower_candidate(*step.workload, Target{}, *default_config(*step.workload, Target{}));
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ(ir::to_string(*f).find("Bp"), std::string::npos) << "the built step packs its weight again";
  }
  EXPECT_EQ(dense, 6);
  builds_and_matches(*graph, test_model("bert_layer_small.onnx"),
                     tunefarm::testing::scratch_dir() + "/model_build_test/packed");
}

// A record of a dense layer from before weights were packed at build time (its workload without
// w_block) builds the layer as it was measured: W[N, K], packed by the kernel at run time.
TEST(ModelBuild, DenseRecordsFromBeforePanelsBuildAsMeasured) {
  ImportOptions options;
  options.input_shapes["hidden_states"] = {1, 16, 64};
  auto graph = import_onnx_file(test_model("bert_layer_small.onnx"), options);
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  std::vector<std::string> asked;
  auto older = [&](const Workload& w) -> StatusOr<ChosenKernel> {
    asked.push_back(w.to_string());
    if (w.op != "dense") return defaults(w);
    Workload plain = operators::without_weight_panels(w);
    TF_ASSIGN_OR_RETURN(ChosenKernel chosen, defaults(plain));
    chosen.tuned = true;
    chosen.record_json = "{}";
    chosen.workload = plain;
    return chosen;
  };
  auto model = build_model(*graph, "older", Target{}, older);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  std::string manifest;
  for (const auto& f : model->files)
    if (f.name == "manifest.json") manifest = f.content;
  auto kernels = nlohmann::json::parse(manifest)["kernels"];
  int dense = 0;
  for (const auto& k : kernels) {
    std::string w = k["workload"];
    if (!w.starts_with("dense:")) continue;
    ++dense;
    EXPECT_EQ(w.find("w_block"), std::string::npos) << w;
    EXPECT_EQ(k["source"], "tuned");
  }
  EXPECT_EQ(dense, 3);
  // Each workload was asked for once.
  std::sort(asked.begin(), asked.end());
  EXPECT_EQ(std::adjacent_find(asked.begin(), asked.end()), asked.end());
  std::string dir = tunefarm::testing::scratch_dir() + "/model_build_test/older";
  std::filesystem::create_directories(dir);
  for (const auto& f : model->files) std::ofstream(dir + "/" + f.name, std::ios::binary) << f.content;
  matches_onnxruntime(test_model("bert_layer_small.onnx"), dir, "1e-4");
}

// Every convolution that has a Winograd form built in it, as if that form had measured faster: the
// model build transforms the node's weight (group by group for a grouped convolution) and calls
// the form's kernel. ResNet-50 (small)'s 3x3 at 16x16 takes F(4x4); two groups of 16 channels at
// 8x8 take F(2x2). Outputs within 1e-4 of ONNX Runtime's.
TEST(ModelBuild, WinogradFormsBuildWithTheirWeightsTransformedAndMatchOnnxRuntime) {
  auto winograd_where_it_can = [](const Workload& w) -> StatusOr<ChosenKernel> {
    std::optional<Workload> form = winograd_form(w);
    if (!form) return defaults(w);
    TF_ASSIGN_OR_RETURN(ChosenKernel chosen, defaults(*form));
    chosen.tuned = true;
    chosen.record_json = "{}";
    chosen.workload = *form;
    return chosen;
  };
  ModelBuilder grouped;
  grouped.input("x", {1, 32, 8, 8});
  grouped.output("y", {1, 32, 8, 8});
  grouped.weight("w", {32, 16, 3, 3}, -0.3f);
  auto* conv = grouped.node("Conv", {"x", "w"}, "y", "grouped_conv");
  ModelBuilder::integer(conv, "group", 2);
  ModelBuilder::ints(conv, "pads", {1, 1, 1, 1});
  std::string dir = tunefarm::testing::scratch_dir() + "/model_build_test/winograd";
  std::filesystem::create_directories(dir);
  std::string grouped_file = dir + "/grouped.onnx";
  std::ofstream(grouped_file, std::ios::binary) << grouped.bytes();
  for (const auto& [file, form] : {std::pair<std::string, std::string>{test_model("resnet50_small.onnx"), "winograd=4"},
                                   {grouped_file, "winograd=2"}}) {
    auto graph = import_onnx_file(file);
    ASSERT_TRUE(graph.ok()) << graph.status().to_string();
    auto model = build_model(*graph, "wino", Target{}, winograd_where_it_can);
    ASSERT_TRUE(model.ok()) << file << ": " << model.status().to_string();
    std::string out = dir + "/" + std::filesystem::path(file).stem().string();
    std::filesystem::create_directories(out);
    std::string manifest;
    for (const auto& f : model->files) {
      std::ofstream(out + "/" + f.name, std::ios::binary) << f.content;
      if (f.name == "manifest.json") manifest = f.content;
    }
    int winograd = 0;
    nlohmann::json parsed = nlohmann::json::parse(manifest);
    for (const auto& k : parsed["kernels"]) {
      std::string w = k["workload"];
      winograd += w.ends_with(form);
    }
    EXPECT_EQ(winograd, 1) << file << ": " << manifest;
    matches_onnxruntime(file, out, "1e-4");
  }
}

// A transformer fed as users export one: int64 token ids and attention mask. The library takes
// them as int64 (its header and manifest say so), looks the ids up in the embedding, applies the
// mask as BERT (Cast, Sub, Mul) and scaled_dot_product_attention (Equal, Where) write it, and
// matches ONNX Runtime on ids over the whole vocabulary and a padded mask.
TEST(ModelBuild, TokenIdInputsMatchOnnxRuntime) {
  Built b = build("token_encoder_small.onnx", "tokens");
  ASSERT_FALSE(b.model.files.empty());
  matches_onnxruntime("token_encoder_small.onnx", b.dir, "1e-4");
  Loaded lib(b.dir, "tokens");
  auto input_dtype = lib.fn<const char* (*)(int)>("input_dtype");
  ASSERT_TRUE(input_dtype);
  EXPECT_STREQ(input_dtype(0), "int64");
  EXPECT_STREQ(input_dtype(1), "int64");
  EXPECT_EQ(input_dtype(2), nullptr);
  auto manifest = nlohmann::json::parse(std::ifstream(b.dir + "/manifest.json"));
  EXPECT_EQ(manifest["inputs"][0]["name"], "input_ids");
  EXPECT_EQ(manifest["inputs"][0]["dtype"], "int64");
  EXPECT_EQ(manifest["outputs"][0]["dtype"], "float32");
}

// A boolean input is a byte each, any byte but 0 true (a C caller's bools need not be 0 and 1); an
// integer output (ArgMax's labels) comes out as the int64 the file declares, a comparison as bytes
// 0 and 1, not as floats.
TEST(ModelBuild, BooleanInputsAndIntegerOutputsAreOfTheFilesTypes) {
  onnx::ModelProto proto;
  proto.set_ir_version(8);
  proto.add_opset_import()->set_version(17);
  onnx::GraphProto& g = *proto.mutable_graph();
  g.set_name("types");
  auto io = [](onnx::ValueInfoProto* v, const std::string& name, int type, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  io(g.add_input(), "mask", onnx::TensorProto::BOOL, {2, 3});
  io(g.add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  io(g.add_output(), "y", onnx::TensorProto::FLOAT, {2, 3});
  io(g.add_output(), "labels", onnx::TensorProto::INT64, {2});
  io(g.add_output(), "high", onnx::TensorProto::BOOL, {2, 3});
  io(g.add_input(), "threshold", onnx::TensorProto::FLOAT, {1});
  auto node = [&](const std::string& op, std::vector<std::string> in, const std::string& out) {
    onnx::NodeProto* n = g.add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (const auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  };
  testing::ModelBuilder::integer(node("Cast", {"mask"}, "f"), "to", onnx::TensorProto::FLOAT);
  node("Add", {"f", "x"}, "y");
  onnx::NodeProto* argmax = node("ArgMax", {"y"}, "labels");
  testing::ModelBuilder::integer(argmax, "axis", 1);
  testing::ModelBuilder::integer(argmax, "keepdims", 0);
  node("Greater", {"y", "threshold"}, "high");
  auto graph = import_onnx(proto.SerializeAsString(), "types.onnx");
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  std::string dir = tunefarm::testing::scratch_dir() + "/model_build_test/types";
  ASSERT_NO_FATAL_FAILURE(build_into(*graph, "types", dir));
  Loaded lib(dir, "types");
  auto create = lib.fn<Create>("create");
  auto run = lib.fn<model::Run>("run");
  auto destroy = lib.fn<Destroy>("destroy");
  auto input_dtype = lib.fn<const char* (*)(int)>("input_dtype");
  auto output_dtype = lib.fn<const char* (*)(int)>("output_dtype");
  ASSERT_TRUE(create && run && destroy && input_dtype && output_dtype);
  EXPECT_STREQ(input_dtype(0), "bool");
  EXPECT_STREQ(output_dtype(0), "float32");
  EXPECT_STREQ(output_dtype(1), "int64");
  EXPECT_STREQ(output_dtype(2), "bool");
  void* m = nullptr;
  ASSERT_EQ(create((dir + "/types.weights").c_str(), &m), 0);
  const uint8_t mask[6] = {0, 1, 2, 255, 0, 7};
  const float x[6] = {0.5f, 0.25f, 0.f, 0.f, 0.75f, 0.f};
  const float threshold = 0.9f;
  float y[6];
  int64_t labels[2] = {-1, -1};
  uint8_t high[6];
  std::fill(high, high + 6, 9);
  const void* ins[] = {mask, x, &threshold};
  float* outs[] = {y, reinterpret_cast<float*>(labels), reinterpret_cast<float*>(high)};
  const int64_t in_n[] = {6, 6, 1}, out_n[] = {6, 2, 6};
  ASSERT_EQ(run(m, ins, in_n, outs, out_n), 0);
  EXPECT_EQ(std::vector<uint8_t>(high, high + 6), (std::vector<uint8_t>{0, 1, 1, 1, 0, 1}));
  EXPECT_EQ(std::vector<float>(y, y + 6), (std::vector<float>{0.5f, 1.25f, 1.f, 1.f, 0.75f, 1.f}));
  EXPECT_EQ(labels[0], 1);
  EXPECT_EQ(labels[1], 0);
  destroy(m);
}

// A step runs on the runtime's threads where its work repays the fork/join: of a 16 x 64 input's
// projection to 64 (131 kFLOP) and to 4096 (8.4 MFLOP), the first runs on one thread, the second
// splits (its 16 rows are one block: the blocks of columns too). On two threads the model gives what it gives on one, bit
// for bit (a step's share of a parallel loop computes what the loop on one thread computes, in the
// same order).
TEST(ModelBuild, TwoThreadsGiveWhatOneThreadGives) {
  testing::ModelBuilder m;
  m.input("x", {16, 64});
  m.weight("w0", {64, 64}, 0.01f);
  m.weight("w1", {64, 4096}, -0.02f);
  m.node("MatMul", {"x", "w0"}, "a");
  m.node("MatMul", {"a", "w1"}, "h");
  m.node("Softmax", {"h"}, "y");
  m.output("y", {16, 4096});
  auto graph = import_onnx(m.bytes(), "threads.onnx");
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  std::string dir = tunefarm::testing::scratch_dir() + "/model_build_test/threads";
  ASSERT_NO_FATAL_FAILURE(build_into(*graph, "threads", dir));
  std::ifstream manifest_file(dir + "/manifest.json");
  std::string manifest((std::istreambuf_iterator<char>(manifest_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(manifest.find(R"("parallel": "outer")"), std::string::npos) << manifest;
  EXPECT_NE(manifest.find(R"("parallel": "none")"), std::string::npos) << manifest;
  int64_t in_n = 16 * 64, out_n = 16 * 4096;
  std::vector<float> in(static_cast<size_t>(in_n));
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(0.1f * static_cast<float>(i));
  std::vector<float> out[2];
  ASSERT_NO_FATAL_FAILURE(run_on_one_and_two_threads(dir, "threads", in, out_n, out));
  // Two instances run side by side on two threads, the pool's two threads between them (a step
  // whose launch finds the pool held by the other's runs on its own thread): neither waits on the
  // other for ever, and both give what one thread gave.
  Loaded lib(dir, "threads");
  auto create = lib.fn<Create>("create");
  auto run = lib.fn<model::Run>("run");
  auto destroy = lib.fn<Destroy>("destroy");
  auto set_num_threads = lib.fn<int (*)(int)>("set_num_threads");
  ASSERT_TRUE(create && run && destroy && set_num_threads);
  ASSERT_EQ(set_num_threads(2), 0);
  void* model = nullptr;
  void* second = nullptr;
  ASSERT_EQ(create((dir + "/threads.weights").c_str(), &model), 0);
  ASSERT_EQ(create((dir + "/threads.weights").c_str(), &second), 0);
  int wrong[2] = {0, 0};
  auto runs = [&](void* instance, int* wrong_runs) {
    std::vector<float> o(static_cast<size_t>(out_n));
    const void* ins[] = {in.data()};
    float* outs[] = {o.data()};
    for (int r = 0; r < 20; ++r)
      if (run(instance, ins, &in_n, outs, &out_n) != 0 || o != out[0]) ++*wrong_runs;
  };
  std::thread side_a(runs, model, &wrong[0]), side_b(runs, second, &wrong[1]);
  side_a.join();
  side_b.join();
  EXPECT_EQ(wrong[0] + wrong[1], 0);
  destroy(second);
  destroy(model);
  double row_sum = 0;
  for (int64_t c = 0; c < 4096; ++c) row_sum += out[0][static_cast<size_t>(c)];
  EXPECT_NEAR(row_sum, 1.0, 1e-4);
  for (float v : out[0]) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(out[0], out[1]);
}

// `m` written to the scratch folder as <name>.onnx (what is built from it goes to <name>/) and
// imported.
void write_and_import(const testing::ModelBuilder& m, const std::string& name, std::string& dir, Graph& graph) {
  dir = tunefarm::testing::scratch_dir() + "/model_build_test/" + name;
  std::filesystem::create_directories(dir);
  std::ofstream(dir + ".onnx", std::ios::binary) << m.bytes();
  auto imported = import_onnx_file(dir + ".onnx");
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  graph = *imported;
}

// The operators of the steps `graph` lowers to after the passes (" to NCHWc Conv ..."), and the
// workloads of its kernels, a line each.
void lowered_steps(const Graph& graph, std::string& steps, std::string* workloads = nullptr) {
  Graph passed = graph;
  ASSERT_TRUE(run_passes(passed).ok());
  auto program = lower_graph(passed);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  for (const Step& step : program->steps) {
    steps += " " + step.op;
    if (workloads && step.workload) *workloads += step.workload->to_string() + "\n";
  }
}

// `m` (written as <name>.onnx) lowers to `expected` steps, and its build's outputs are within 1e-4
// of ONNX Runtime's.
void lowers_to_and_matches(const testing::ModelBuilder& m, const std::string& name, const std::string& expected) {
  std::string dir, steps;
  Graph graph;
  ASSERT_NO_FATAL_FAILURE(write_and_import(m, name, dir, graph));
  ASSERT_NO_FATAL_FAILURE(lowered_steps(graph, steps));
  EXPECT_EQ(steps, expected) << steps;
  builds_and_matches(graph, dir + ".onnx", dir);
}

// A grouped convolution (RegNet's groups of 8 channels) runs its groups on the threads side by
// side, one group's kernel on each: on two threads the model gives what it gives on one, bit for
// bit, and what ONNX Runtime gives.
TEST(ModelBuild, GroupsOfAGroupedConvolutionRunOnThreadsSideBySide) {
  testing::ModelBuilder m;
  m.set_opset(17);
  m.input("x", {1, 40, 6, 6});
  m.weight("w", {40, 8, 3, 3}, -0.05f);
  onnx::NodeProto* conv = m.node("Conv", {"x", "w"}, "c");
  ModelBuilder::ints(conv, "pads", {1, 1, 1, 1});
  ModelBuilder::integer(conv, "group", 5);
  m.node("Relu", {"c"}, "y");
  m.output("y", {1, 40, 6, 6});
  std::string dir;
  Graph graph;
  ASSERT_NO_FATAL_FAILURE(write_and_import(m, "grouped_threads", dir, graph));
  builds_and_matches(graph, dir + ".onnx", dir);
  int64_t n = 40 * 6 * 6;
  std::vector<float> in(static_cast<size_t>(n)), out[2];
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::cos(0.3f * static_cast<float>(i));
  ASSERT_NO_FATAL_FAILURE(run_on_one_and_two_threads(dir, "m", in, n, out));
  EXPECT_GT(std::count_if(out[0].begin(), out[0].end(), [](float v) { return v > 0; }), 0);
  EXPECT_EQ(out[0], out[1]);
}

// The steps that feed a row-wise one, folded into it (model/passes/fuse_row_inputs.h): attention's
// scale and a mask of -inf and large negative entries (-1 / relu(m): -inf where m <= 0) before a
// Softmax, a constant scale before another, a residual Add before a LayerNormalization. Rows of
// 150, 17 and 200 (not multiples of the 64 columns a row statistic accumulates in, nor all of the
// 16 lanes), whose last blocks are read as vectors, not gathered. Outputs within 1e-5 of ONNX
// Runtime's, and no step of their own for the folded nodes.
TEST(ModelBuild, RowWiseStepsWithTheirInputsFoldedMatchOnnxRuntime) {
  testing::ModelBuilder m;
  m.set_opset(17);
  m.input("scores", {1, 2, 3, 150});
  m.input("m", {1, 1, 1, 150});
  m.input("small", {1, 2, 17, 17});
  m.input("x", {1, 3, 200});
  m.input("residual", {1, 3, 200});
  m.weight("eight", {}, 8.f);
  m.weight("minus_one", {}, -1.f);
  m.weight("gamma", {200}, 0.9f);
  m.weight("beta", {200}, -0.1f);
  m.node("Relu", {"m"}, "relu_m");
  m.node("Div", {"minus_one", "relu_m"}, "mask");
  m.node("Div", {"scores", "eight"}, "scaled");
  m.node("Add", {"scaled", "mask"}, "masked");
  m.node("Softmax", {"masked"}, "p");
  m.node("Mul", {"small", "eight"}, "small_scaled");
  m.node("Softmax", {"small_scaled"}, "q");
  m.node("Add", {"x", "residual"}, "sum");
  m.node("LayerNormalization", {"sum", "gamma", "beta"}, "y");
  m.output("p", {1, 2, 3, 150});
  m.output("q", {1, 2, 17, 17});
  m.output("y", {1, 3, 200});
  std::string dir;
  Graph graph;
  ASSERT_NO_FATAL_FAILURE(write_and_import(m, "row_inputs", dir, graph));
  std::string file = dir + ".onnx";
  auto built = build_model(graph, "rows", Target{}, defaults);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  // The mask (Relu and Div, one step: the Relu computed inside the Div), the two Softmax and the
  // LayerNormalization.
  EXPECT_EQ(built->steps, 4);
  for (const auto& f : built->files) {
    std::ofstream(dir + "/" + f.name, std::ios::binary) << f.content;
    // The rows' last, partial blocks are read as dense vectors inside the row, not gathered.
    if (f.name == "librows.so") EXPECT_EQ(tunefarm::testing::disassemble(f.content).find("gather"), std::string::npos);
  }
  matches_onnxruntime(file, dir, "1e-5");
}

// A chain of elementwise nodes (a batch norm no convolution takes, as Mul and Add, then ReLU, then
// a Sub of another input read twice) runs as one step that reads the inputs and writes the
// output: each step computes the one before it where it loads its output. A value two nodes
// read (the Sub's operand) is a step of its own. Outputs within 1e-6 of ONNX Runtime's.
TEST(ModelBuild, ElementwiseChainsRunAsOneStep) {
  testing::ModelBuilder m;
  m.set_opset(17);
  m.input("x", {1, 5, 7, 3});
  m.input("z", {1, 5, 7, 3});
  m.weight("scale", {5, 1, 1}, 1.5f);
  m.weight("shift", {5, 1, 1}, -0.25f);
  m.weight("half", {}, 0.5f);
  m.node("Mul", {"x", "scale"}, "scaled");
  m.node("Add", {"scaled", "shift"}, "shifted");
  m.node("Relu", {"shifted"}, "r");
  m.node("Mul", {"z", "half"}, "zh");
  m.node("Sub", {"r", "zh"}, "d");
  m.node("Max", {"d", "zh"}, "y");
  m.output("y", {1, 5, 7, 3});
  std::string dir;
  Graph graph;
  ASSERT_NO_FATAL_FAILURE(write_and_import(m, "chains", dir, graph));
  std::string file = dir + ".onnx";
  auto built = build_model(graph, "chains", Target{}, defaults);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  // zh (read by the Sub and the Max), then the rest as one.
  EXPECT_EQ(built->steps, 2);
  for (const auto& f : built->files) std::ofstream(dir + "/" + f.name, std::ios::binary) << f.content;
  matches_onnxruntime(file, dir, "1e-6");
}

// DenseNet's layer: the block's input and a convolution's output concatenated along the channels,
// then batch norm (no convolution to fold it into), ReLU and a convolution. The concatenation is
// written in the convolutions' channel blocks, and the batch norm and ReLU run in them as one
// step: no conversion to NCHW and back between the convolutions. Outputs within 1e-5 of ONNX
// Runtime's.
TEST(ModelBuild, ConcatenationsAlongChannelsStayInChannelBlocks) {
  testing::ModelBuilder m;
  m.set_opset(17);
  m.input("x", {1, 16, 6, 5});
  m.weight("w1", {16, 16, 3, 3}, 0.05f);
  m.weight("w2", {16, 32, 1, 1}, 0.05f);
  m.weight("w3", {16, 16, 1, 1}, 0.05f);
  for (const char* p : {"gamma", "beta", "mean", "var"}) m.weight(p, {32}, 0.5f);
  ModelBuilder::ints(m.node("Conv", {"x", "w1"}, "c1"), "pads", {1, 1, 1, 1});
  m.node("Conv", {"c1", "w3"}, "c2");
  ModelBuilder::integer(m.node("Concat", {"c1", "c2"}, "cat"), "axis", 1);
  m.node("BatchNormalization", {"cat", "gamma", "beta", "mean", "var"}, "bn");
  m.node("Relu", {"bn"}, "r");
  m.node("Conv", {"r", "w2"}, "c3");
  m.node("Relu", {"c3"}, "y");
  m.output("y", {1, 16, 6, 5});
  // One conversion: the input into the first convolution's blocks (the last one's epilogue writes
  // the output in NCHW).
  lowers_to_and_matches(m, "concat_blocks", " to NCHWc Conv Conv Concat Relu Conv epilogue");
}

// GoogLeNet's max pooling rounds its output size up (ceil_mode): its last windows reach past the
// input, and it runs in the convolutions' channel blocks all the same; a classifier's mean over
// rows and columns without kept dimensions (ShuffleNetV2's, [1, C]) reads the blocks and writes the
// means in channel order. No conversion but the image's into the first convolution's blocks.
TEST(ModelBuild, PoolingThatRoundsUpAndMeansReadChannelBlocks) {
  testing::ModelBuilder m;
  m.set_opset(17);
  m.input("x", {1, 16, 8, 7});
  m.weight("w1", {16, 16, 3, 3}, 0.05f);
  m.weight("w2", {32, 16, 1, 1}, 0.05f);
  m.weight("fc", {10, 32}, 0.02f);
  ModelBuilder::ints(m.node("Conv", {"x", "w1"}, "c1"), "pads", {1, 1, 1, 1});
  m.node("Relu", {"c1"}, "r1");
  onnx::NodeProto* pool = m.node("MaxPool", {"r1"}, "p");
  ModelBuilder::ints(pool, "kernel_shape", {3, 3});
  ModelBuilder::ints(pool, "strides", {2, 2});
  ModelBuilder::integer(pool, "ceil_mode", 1);
  m.node("Conv", {"p", "w2"}, "c2");
  m.node("Relu", {"c2"}, "r2");
  onnx::NodeProto* mean = m.node("ReduceMean", {"r2"}, "mean");
  ModelBuilder::ints(mean, "axes", {2, 3});
  ModelBuilder::integer(mean, "keepdims", 0);
  ModelBuilder::integer(m.node("Gemm", {"mean", "fc"}, "y"), "transB", 1);
  m.output("y", {1, 10});
  lowers_to_and_matches(m, "pool_blocks", " to NCHWc Conv MaxPool Conv ReduceMean Gemm");
}

// ShuffleNetV2's 58 channels, which no vector block divides, run padded to 64 through its 1x1 and
// depthwise convolutions, a bias, ReLU, a scaling per channel and a residual add of two padded
// tensors; the Concat and the model output read the 58 channels sliced out of the blocks once, and
// a convolution reading an input of 58 channels pads it first. Outputs within 1e-4 of ONNX Runtime's.
TEST(ModelBuild, ChannelsNoBlockDividesRunPaddedToWholeVectors) {
  testing::ModelBuilder m;
  m.set_opset(17);
  m.input("x", {1, 24, 8, 8});
  m.input("y", {1, 58, 8, 8});
  m.weight("w1", {58, 24, 1, 1}, 0.05f);
  m.weight("b1", {58}, -0.3f);
  m.weight("dw", {58, 1, 3, 3}, 0.05f);
  m.weight("w2", {58, 58, 1, 1}, -0.02f);
  m.weight("scale", {58, 1, 1}, 0.5f);
  m.weight("w3", {16, 58, 1, 1}, 0.05f);
  m.node("Conv", {"x", "w1", "b1"}, "c1");
  m.node("Relu", {"c1"}, "r1");
  onnx::NodeProto* dw = m.node("Conv", {"r1", "dw"}, "d");
  ModelBuilder::ints(dw, "pads", {1, 1, 1, 1});
  ModelBuilder::integer(dw, "group", 58);
  m.node("Conv", {"d", "w2"}, "c2");
  m.node("Relu", {"c2"}, "r2");
  m.node("Mul", {"r2", "scale"}, "s");
  m.node("Add", {"s", "r1"}, "a");
  ModelBuilder::integer(m.node("Concat", {"a", "x"}, "cat"), "axis", 1);
  m.node("Conv", {"y", "w3"}, "c3");
  m.output("a", {1, 58, 8, 8});
  m.output("cat", {1, 82, 8, 8});
  m.output("c3", {1, 16, 8, 8});
  std::string dir;
  Graph graph;
  ASSERT_NO_FATAL_FAILURE(write_and_import(m, "padded_channels", dir, graph));
  std::string steps, workloads;
  ASSERT_NO_FATAL_FAILURE(lowered_steps(graph, steps, &workloads));
  // The scaling joins the second 1x1 convolution's weights; the 58 channels come out of the
  // blocks in one step ("from NCHWc", the Slice); y is padded, then blocked.
  EXPECT_EQ(steps, " to NCHWc Conv Conv Conv Add from NCHWc Concat Pad to NCHWc Conv epilogue");
  EXPECT_NE(workloads.find("conv2d_nchwc:N=1,C=24,H=8,W=8,K=64,"), std::string::npos) << workloads;
  EXPECT_NE(workloads.find("depthwise_conv2d_nchwc:N=1,C=64,"), std::string::npos) << workloads;
  EXPECT_NE(workloads.find("conv2d_nchwc:N=1,C=64,H=8,W=8,K=64,"), std::string::npos) << workloads;
  EXPECT_NE(workloads.find("conv2d_nchwc:N=1,C=64,H=8,W=8,K=16,"), std::string::npos) << workloads;
  EXPECT_EQ(workloads.find("nchw:"), std::string::npos) << workloads;
  builds_and_matches(graph, dir + ".onnx", dir);
}

// The operators of today's exporters, in small models the current onnx package writes (its IR
// version, external data): RegNet's grouped convolution and squeeze-excite, SiLU, ShuffleNet's
// split (as Split and as the TorchScript exporter's Slices) and channel shuffle, MobileNetV3's
// HardSwish and HardSigmoid, ViT/Swin/BERT attention (Einsum, Where, Gather, window reshapes),
// LayerNormalization, GELU (the operator and the tanh form), the model zoo's LRN and rarer
// activations, LSTM, GRU and RNN unrolled, batched MatMuls that broadcast, timm's standardized
// weights and depthwise convolutions of two filters a channel, a segmentation head's upsampling,
// atrous convolutions run by region, video networks' 3-D convolutions over frames: built, outputs
// within 1e-4 of ONNX Runtime's.
TEST(ModelBuild, ExportersPatternsMatchOnnxRuntime) {
  std::string dir = tunefarm::testing::scratch_dir() + "/model_build_test/patterns";
  std::string error = testing::write_exporter_patterns(dir);
  ASSERT_TRUE(error.empty()) << error;
  for (const char* name : {"convnet_blocks_opset17", "convnet_blocks_opset18", "mobilenet_v3_block_opset20",
                           "transformer_blocks_opset13", "transformer_blocks_opset20", "transformer_blocks_opset28",
                           "vision_operators_opset13", "vision_operators_opset20", "vision_operators_opset28",
                           "attention_operator_opset23", "attention_operator_opset28", "opt_embeddings",
                           "audio_front_ends_opset17", "audio_front_ends_opset21", "rounding", "argmax_heads",
                           "tf_convolutions", "padding_modes", "reductions", "yolo_head",
                           "symbolic_sizes", "zoo_operators", "view_outputs", "recurrent",
                           "broadcast_matmuls", "timm_convolutions", "segmentation_heads",
                           "atrous_pyramid", "video_convolutions"}) {
    std::string file = dir + "/" + name + ".onnx";
    auto graph = import_onnx_file(file);
    ASSERT_TRUE(graph.ok()) << graph.status().to_string();
    builds_and_matches(*graph, file, fmt::format("{}/{}", dir, name));
  }
}

// EfficientNet's and MobileNetV3's activations join their convolutions' kernels (SiLU as
// x * Sigmoid(x), HardSwish as the operator and as x * HardSigmoid(x) before opset 14), and
// squeeze-excitation's pooling, gate and channel scaling run in the convolutions' channel blocks:
// no conversion to NCHW and back around them. Outputs within 1e-4 of ONNX Runtime's.
TEST(ModelBuild, ActivationsAndSqueezeExcitationStayInChannelBlocks) {
  std::string dir = tunefarm::testing::scratch_dir() + "/model_build_test/blocked_patterns";
  std::string error = testing::write_exporter_patterns(dir);
  ASSERT_TRUE(error.empty()) << error;
  for (const char* name : {"mobilenet_v3_block_opset13", "mobilenet_v3_block_opset20", "convnet_blocks_opset17"}) {
    std::string file = dir + "/" + name + ".onnx";
    auto graph = import_onnx_file(file);
    ASSERT_TRUE(graph.ok()) << graph.status().to_string();
    Graph passed = *graph;
    ASSERT_TRUE(run_passes(passed).ok());
    auto program = lower_graph(passed);
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    std::string steps;
    int conversions = 0, activations = 0, fused = 0;
    for (const Step& step : program->steps) {
      steps += " " + step.op;
      conversions += step.op == "from NCHWc" || step.op == "to NCHWc";
      activations += step.op == "Sigmoid" || step.op == "HardSwish" || step.op == "Mul";
      if (step.workload) {
        std::string w = step.workload->to_string();
        fused += w.find("silu=1") != std::string::npos || w.find("hardswish=1") != std::string::npos;
      }
    }
    if (std::string(name).starts_with("mobilenet_v3")) {
      // None: the image goes into the first convolution as it comes (blocks of one channel are
      // NCHW), and the pooled features out to the classifier are in channel order.
      EXPECT_EQ(conversions, 0) << name << ":" << steps;
      // Squeeze-excitation's channel scaling; the three HardSwish after convolutions are fused.
      EXPECT_EQ(activations, 1) << name << ":" << steps;
      EXPECT_EQ(fused, 3) << name << ":" << steps;
    } else {
      // The SiLU after a 1x1 convolution.
      EXPECT_EQ(fused, 1) << name << ":" << steps;
    }
    builds_and_matches(*graph, file, fmt::format("{}/{}", dir, name));
  }
}

// `name`, one of the models make_models.py writes in today's exporters' patterns (into `dir`):
// imported, and the program the passes and the lowering make of it.
void lower_pattern(const std::string& dir, const std::string& name, Graph& graph, Program& program) {
  std::string error = testing::write_exporter_patterns(dir);
  ASSERT_TRUE(error.empty()) << error;
  auto imported = import_onnx_file(dir + "/" + name + ".onnx");
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  graph = *imported;
  Graph passed = graph;
  ASSERT_TRUE(run_passes(passed).ok());
  auto lowered = lower_graph(passed);
  ASSERT_TRUE(lowered.ok()) << lowered.status().to_string();
  program = std::move(*lowered);
}

// A program's operators in order, and how many of its steps convert layouts and transpose.
struct Movement {
  std::string steps;
  int conversions = 0;
  int transposes = 0;
};

Movement tally_movement(const Program& program) {
  Movement m;
  for (const Step& step : program.steps) {
    m.steps += " " + step.op;
    m.conversions += step.op == "from NCHWc" || step.op == "to NCHWc";
    m.transposes += step.op == "Transpose";
  }
  return m;
}

// ConvNeXt moves every block's activations to channels-last for its LayerNorm and back: the
// Transposes read the depthwise convolutions' channel blocks and write the blocks the next
// convolution reads, and the layer scale (a constant [C, 1, 1]) and residual add run in those
// blocks (with the Transpose back, as one step): no conversion step but the pooled features' to
// the classifier. Outputs within 1e-4 of
// ONNX Runtime's.
TEST(ModelBuild, ChannelsLastTransposesMoveBlockedDataOnce) {
  std::string dir = tunefarm::testing::scratch_dir() + "/model_build_test/convnext";
  Graph graph;
  Program program;
  ASSERT_NO_FATAL_FAILURE(lower_pattern(dir, "convnext_stages_small", graph, program));
  auto [steps, conversions, transposes] = tally_movement(program);
  EXPECT_EQ(conversions, 1) << steps;
  // Two per LayerNorm2d (after the stem, before the downsampling) and one per block (two blocks):
  // a block's Transpose back to channels first and its layer scale are computed inside the
  // residual add's step.
  EXPECT_EQ(transposes, 6) << steps;
  EXPECT_EQ(steps.find(" Mul"), std::string::npos) << steps;
  builds_and_matches(graph, dir + "/convnext_stages_small.onnx", dir + "/built");
}

// Reductions over axes other than the last (ConvNeXt V2's norm over a channels-last map's rows and
// columns: 3.9 ms scalar for [1, 56, 56, 384], each channel's sum a chain of loads 1.5 KiB
// apart) run along the last axis' lanes, each lane a sum of its own; reductions that include the
// last axis and are not a row's statistic (ReduceLogSumExp over the middle axis is one) stay
// scalar. Outputs within 1e-4 of ONNX Runtime's (ExportersPatternsMatchOnnxRuntime).
TEST(ModelBuild, ReductionsOfOtherAxesRunAlongTheLastAxisLanes) {
  std::string dir = tunefarm::testing::scratch_dir() + "/model_build_test/reductions";
  Graph graph;
  Program program;
  ASSERT_NO_FATAL_FAILURE(lower_pattern(dir, "reductions", graph, program));
  std::map<std::string, int> vectorized, scalar;
  for (const Step& step : program.steps)
    if (step.op.starts_with("Reduce")) (step.vectorize ? vectorized : scalar)[step.op]++;
  // The last axis' own (ReduceMax, ReduceMin, ReduceSum, ReduceMean, ReduceL2 of the pooled rows)
  // as rows; ReduceMean over the tokens, ReduceL1, ReduceSumSquare, the norm and the maximum over
  // axes 0 and 1 along the lanes.
  EXPECT_EQ(vectorized["ReduceL1"], 1);
  EXPECT_EQ(vectorized["ReduceSumSquare"], 1);
  EXPECT_EQ(vectorized["ReduceL2"], 2);
  EXPECT_EQ(vectorized["ReduceMax"], 2);
  EXPECT_EQ(vectorized["ReduceMean"], 2);
  EXPECT_EQ(scalar["ReduceLogSumExp"], 1);
}

// SegFormer's tokens to the map and back (Transpose of [1, H*W, C] beside a Reshape to [1, C, H, W],
// both ways) around its depthwise and spatial-reduction convolutions: 4-D Transposes that write
// and read the convolutions' channel blocks, whole vectors of channels at a time; no conversion
// step and no 3-D Transpose (each vector of those gathered from rows H*W apart). Outputs within
// 1e-4 of ONNX Runtime's.
TEST(ModelBuild, TokensToAMapAndBackMoveWholeChannelBlocks) {
  std::string dir = tunefarm::testing::scratch_dir() + "/model_build_test/mix_ffn";
  Graph graph;
  Program program;
  ASSERT_NO_FATAL_FAILURE(lower_pattern(dir, "mix_ffn", graph, program));
  auto [steps, conversions, transposes] = tally_movement(program);
  for (const Step& step : program.steps) {
    if (step.op != "Transpose") continue;
    const auto& shape = step.compute.output.shape();
    // [N, C/16, H, W, 16] into the blocks, [N, H, W, C/16, 16] out of them.
    EXPECT_TRUE(shape.size() == 5 && shape.back() == 16) << shape_string(shape) << ":" << steps;
  }
  EXPECT_EQ(conversions, 0) << steps;
  EXPECT_EQ(transposes, 4) << steps;
  builds_and_matches(graph, dir + "/mix_ffn.onnx", dir + "/built");
}

// GPT-2's block as exported: each Conv1D (a Gemm between Reshapes) is one dense task with its
// bias, the FFN's gelu_new (written out with Pow and Tanh) and both residual adds in its kernel.
// Outputs within 1e-4 of ONNX Runtime's.
// wav2vec 2.0's and Whisper's front ends put a GELU between their 1-D convolutions, which run as
// 2-D ones over one row: the GELU runs on that row's map in the channel blocks the convolution
// wrote (unary_before_views), not on the [N, C, L] view in NCHW (each converted twice: 2.4 ms of a
// 38 ms wav2vec 2.0). Outputs within 1e-4 of ONNX Runtime's.
TEST(ModelBuild, AGeluBetweenOneDConvolutionsRunsInTheirChannelBlocks) {
  std::string dir = tunefarm::testing::scratch_dir() + "/model_build_test/gelu_blocks";
  Graph graph;
  Program program;
  ASSERT_NO_FATAL_FAILURE(lower_pattern(dir, "audio_front_ends_opset17", graph, program));
  Movement m = tally_movement(program);
  // wav2vec's second and third convolutions, each with its GELU as its epilogue, one after the
  // other in channel blocks (the first one's GroupNorm reads NCHW, as do the Pads of Whisper's).
  EXPECT_NE(m.steps.find(" Conv epilogue Conv epilogue from NCHWc GlobalAveragePool"), std::string::npos) << m.steps;
  EXPECT_EQ(m.conversions, 9) << m.steps;
  builds_and_matches(graph, dir + "/audio_front_ends_opset17.onnx", dir + "/out");
}

// Reductions over rows and columns run in the convolutions' channel blocks, as the spatial mean
// does: ConvNeXt V2's global response norm (ReduceL2), max, min, sum, L1, sum of squares and
// GlobalMaxPool gates, over 32 channels and over 24 padded to 32. Only the response norm's mean
// over channels and the ReduceMax that is the model's [N, C] output read NCHW.
TEST(ModelBuild, SpatialReductionsRunInChannelBlocks) {
  std::string dir = tunefarm::testing::scratch_dir() + "/model_build_test/spatial_reductions";
  Graph graph;
  Program program;
  ASSERT_NO_FATAL_FAILURE(lower_pattern(dir, "spatial_reductions", graph, program));
  Movement m = tally_movement(program);
  int blocked = 0;
  for (const Step& step : program.steps)
    if (step.op.rfind("Reduce", 0) == 0 || step.op == "GlobalMaxPool")
      blocked += step.tensors.size() == 2 && step.compute.output.shape().size() == 5;
  EXPECT_EQ(blocked, 9) << m.steps;
  EXPECT_LE(m.conversions, 3) << m.steps;
  builds_and_matches(graph, dir + "/spatial_reductions.onnx", dir + "/built");
}

// GhostNet's concatenations of blocks of 8 and of 24 reach the next convolutions' blocks of 16
// in one pass each, not through NCHW and back.
TEST(ModelBuild, ValuesInOtherBlocksAreReblockedInOnePass) {
  std::string dir = tunefarm::testing::scratch_dir() + "/model_build_test/ghost_modules";
  Graph graph;
  Program program;
  ASSERT_NO_FATAL_FAILURE(lower_pattern(dir, "ghost_modules", graph, program));
  Movement m = tally_movement(program);
  int reblocked = 0;
  for (const Step& step : program.steps) reblocked += step.op == "reblock NCHWc";
  EXPECT_EQ(reblocked, 2) << m.steps;
  EXPECT_EQ(m.steps.find("from NCHWc Conv"), std::string::npos) << m.steps;
  builds_and_matches(graph, dir + "/ghost_modules.onnx", dir + "/built");
}

TEST(ModelBuild, Gpt2ConvOneDLayersTakeTheirGeluAndResidualsIntoTheirKernels) {
  std::string dir = tunefarm::testing::scratch_dir() + "/model_build_test/gpt2";
  Graph graph;
  Program program;
  ASSERT_NO_FATAL_FAILURE(lower_pattern(dir, "gpt2_block_small", graph, program));
  std::vector<std::string> dense;
  std::string steps;
  for (const Step& step : program.steps) {
    steps += " " + step.op;
    if (step.workload && step.workload->op == "dense") dense.push_back(step.workload->to_string());
  }
  EXPECT_EQ(dense, (std::vector<std::string>{"dense:M=8,N=96,K=32,bias=1,w_block=48",
                                             "dense:M=8,N=32,K=32,bias=1,residual=1,w_block=32",
                                             "dense:M=8,N=128,K=32,bias=1,gelu_tanh=1,w_block=32",
                                             "dense:M=8,N=32,K=128,bias=1,residual=1,w_block=32"}))
      << steps;
  EXPECT_EQ(steps.find("Tanh"), std::string::npos) << steps;
  builds_and_matches(graph, dir + "/gpt2_block_small.onnx", dir + "/built");
}

// A LLaMA decoder layer as both exporters write it: RMSNorm written out becomes one row-wise step
// each (no Pow, ReduceMean, Sqrt or Reciprocal left), the gate projection takes its SiLU into its
// kernel, the causal mask of Trilu folds into a constant (TorchScript) or is computed from the
// attention_mask input (dynamo), and the rotary tables are computed at run time by Cos and Sin
// (dynamo). Outputs within 1e-4 of ONNX Runtime's.
TEST(ModelBuild, LlamaDecoderLayersBuildAsTheExportersWriteThem) {
  std::string dir = tunefarm::testing::scratch_dir() + "/model_build_test/llama";
  for (const char* name : {"llama_block_opset17_small", "llama_block_opset18_small"}) {
    Graph graph;
    Program program;
    ASSERT_NO_FATAL_FAILURE(lower_pattern(dir, name, graph, program));
    std::string steps;
    int norms = 0, silu = 0;
    for (const Step& step : program.steps) {
      steps += " " + step.op;
      norms += step.op == "RMSNormalization";
      if (step.workload && step.workload->to_string().find("silu=1") != std::string::npos) ++silu;
    }
    EXPECT_EQ(norms, 2) << name << ":" << steps;
    EXPECT_EQ(silu, 1) << name << ":" << steps;
    for (const char* gone : {" Pow", " ReduceMean", " Sqrt", " Reciprocal", " Sigmoid", " Trilu"})
      EXPECT_EQ(steps.find(gone), std::string::npos) << name << ":" << steps;
    builds_and_matches(graph, dir + "/" + name + ".onnx", dir + "/" + name);
  }
}

}  // namespace
}  // namespace tunefarm::model
