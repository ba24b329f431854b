#include "model/onnx_import.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/onnx_external_data.h"
#include "model/onnx_opsets.h"
#include "model/tasks.h"
#include "tests/model/model_test_util.h"

namespace tunefarm::model {
namespace {

using ::testing::HasSubstr;
using testing::ModelBuilder;
using testing::test_model;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(OnnxImport, ReadsTheGeneratedModelsWithEveryShapeKnown) {
  for (const char* name : {"resnet50_small.onnx", "mobilenet_v2_small.onnx"}) {
    auto graph = import_onnx_file(test_model(name));
    ASSERT_TRUE(graph.ok()) << graph.status().to_string();
    EXPECT_GT(graph->nodes.size(), 10u) << name;
    for (const Node& node : graph->nodes)
      for (const std::string& out : node.outputs) EXPECT_NE(graph->find(out), nullptr) << name << ": " << out;
  }
}

TEST(OnnxImport, ASymbolicInputNeedsItsShape) {
  auto missing = import_onnx_file(test_model("bert_layer_small.onnx"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("input 'hidden_states' has symbolic dimensions [batch, 16, 64]"));
  EXPECT_THAT(missing.status().message(), HasSubstr("--input-shape hidden_states="));
  ImportOptions options;
  options.input_shapes["hidden_states"] = {1, 16, 64};
  auto graph = import_onnx_file(test_model("bert_layer_small.onnx"), options);
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  // The Reshape targets come from Shape/Gather/Concat chains: data propagation resolved them.
  for (const Node& node : graph->nodes)
    if (node.op == "Reshape") {
      ASSERT_NE(graph->find(node.outputs[0]), nullptr) << node.name;
      EXPECT_FALSE(graph->find(node.outputs[0])->shape.empty()) << node.name;
    }
  options.input_shapes = {{"tokens", {1, 16, 64}}};
  auto wrong = import_onnx_file(test_model("bert_layer_small.onnx"), options);
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("the model's inputs are: hidden_states"));
  options.input_shapes = {{"hidden_states", {16, 64}}};
  auto rank = import_onnx_file(test_model("bert_layer_small.onnx"), options);
  ASSERT_FALSE(rank.ok());
  EXPECT_THAT(rank.status().message(), HasSubstr("has 3 dimensions"));
}

TEST(OnnxImport, BadFilesAreOneLineErrors) {
  std::mt19937 rng(7);
  std::string garbage(4096, '\0');
  for (char& c : garbage) c = static_cast<char>(rng());
  auto e = import_onnx(garbage, "garbage.onnx");
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("garbage.onnx: not"));
  std::string whole = read_file(test_model("resnet50_small.onnx"));
  auto cut = import_onnx(whole.substr(0, whole.size() / 2), "cut.onnx");
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(cut.status().message(), HasSubstr("cut.onnx: not an ONNX model"));
  EXPECT_FALSE(import_onnx("", "empty.onnx").ok());
  ImportOptions small;
  small.max_bytes = 1000;
  auto big = import_onnx(whole, "big.onnx", small);
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), HasSubstr("at most"));
  for (const Status& s : {e.status(), cut.status(), big.status()})
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
}

// A tensor whose data names another file is refused before anything looks that file up: the
// answer is the same whether the file exists or not.
TEST(OnnxImport, ExternalDataIsRefusedWithoutLookingTheFileUp) {
  auto import_naming = [](const std::string& location) {
    ModelBuilder m;
    m.input("a", {2, 3});
    m.weight("b", {3, 2});
    m.node("MatMul", {"a", "b"}, "y", "mm");
    m.output("y", {2, 2});
    onnx::ModelProto proto;
    proto.ParseFromString(m.bytes());
    onnx::TensorProto& b = *proto.mutable_graph()->mutable_initializer(0);
    b.clear_float_data();
    b.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* entry = b.add_external_data();
    entry->set_key("location");
    entry->set_value(location);
    return import_onnx(proto.SerializeAsString(), "external.onnx");
  };
  std::string present = "tunefarm-external-present.bin";
  { std::ofstream(present) << std::string(24, '\0'); }
  auto found = import_naming(present);
  auto missing = import_naming("tunefarm-external-missing.bin");
  std::remove(present.c_str());
  ASSERT_FALSE(found.ok());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(found.status().message(), HasSubstr("keeps its data in a file beside the model"));
  EXPECT_EQ(found.status().message(), missing.status().message());
}

// Shapes come from uploaded files: a product past int64 (found by model_fuzz) saturates, so that
// every limit refuses it, instead of overflowing.
TEST(Graph, AnElementCountPastInt64Saturates) {
  Value v;
  v.shape = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(v.elements(), std::numeric_limits<int64_t>::max());
  v.shape = {8, 1297036692682702849};
  EXPECT_EQ(v.elements(), std::numeric_limits<int64_t>::max());
  v.shape = {2, 3, 4};
  EXPECT_EQ(v.elements(), 24);
}

TEST(OnnxImport, AnUnknownOperatorIsNamedWithItsNode) {
  ModelBuilder m;
  m.input("x", {1, 4});
  m.node("FrobnicateAll", {"x"}, "y", "the_node");
  m.output("y", {1, 4});
  auto g = import_onnx(m.bytes(), "custom.onnx");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("FrobnicateAll"));
  EXPECT_THAT(g.status().message(), HasSubstr("the_node"));
  EXPECT_EQ(g.status().message().find('\n'), std::string::npos);
}

TEST(OnnxImport, ShapesBeyondTheWorkloadLimitsAreRefused) {
  ModelBuilder m;
  m.input("x", {1, 3, 2000000, 1});
  m.node("Relu", {"x"}, "y", "r");
  m.output("y", {1, 3, 2000000, 1});
  auto g = import_onnx(m.bytes(), "huge.onnx");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("input 'x' has shape [1, 3, 2000000, 1]"));
}

TEST(OnnxImport, InconsistentShapesAreRefused) {
  ModelBuilder m;
  m.input("a", {2, 3});
  m.weight("b", {4, 5});
  m.node("MatMul", {"a", "b"}, "y", "mm");
  m.output("y", {2, 5});
  auto g = import_onnx(m.bytes(), "shapes.onnx");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("shapes are inconsistent"));
}

// The IR version says how a file is written: one of onnx 1.12's IR 8 with opset 13 reads the same as
// one at a newer IR version.
TEST(OnnxImport, ANewerIrVersionAloneIsNoReasonToRefuse) {
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(read_file(test_model("resnet50_small.onnx"))));
  proto.set_ir_version(onnx::IR_VERSION + 6);
  auto g = import_onnx(proto.SerializeAsString(), "newer_ir.onnx");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_GT(g->nodes.size(), 10u);
}

TEST(OnnxImport, AnOpsetItDoesNotKnowIsRefusedNamingItAndTheOperatorsThatNeedIt) {
  ModelBuilder m;
  m.set_opset(kNewestOpset + 1);
  m.input("x", {1, 4});
  m.node("Relu", {"x"}, "r", "relu");
  m.node("Sigmoid", {"r"}, "y", "gate");
  m.output("y", {1, 4});
  auto g = import_onnx(m.bytes(), "future.onnx");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr(fmt::format("opset {}", kNewestOpset + 1)));
  EXPECT_THAT(g.status().message(), HasSubstr("the operators that need it: Relu, Sigmoid"));
}

// Operators added after opset 17 (libonnx's newest) that tunefarm has no schema for are named
// with their nodes; those it has (Gelu, opset 20; RMSNormalization, 23) import with their shapes.
TEST(OnnxImport, OperatorsOfNewerOpsetsAreReadOrRefusedByName) {
  ModelBuilder m;
  m.set_opset(20);
  m.input("x", {1, 4, 8});
  m.node("Gelu", {"x"}, "g", "gelu");
  m.node("Mish", {"g"}, "y", "mish");
  m.output("y", {1, 4, 8});
  auto g = import_onnx(m.bytes(), "gelu.onnx");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->find("g")->shape, (std::vector<int64_t>{1, 4, 8}));

  ModelBuilder r;
  r.set_opset(23);
  r.input("x", {1, 4, 8});
  r.weight("scale", {8});
  r.node("RMSNormalization", {"x", "scale"}, "y", "norm");
  r.output("y", {1, 4, 8});
  auto rms = import_onnx(r.bytes(), "rms.onnx");
  ASSERT_TRUE(rms.ok()) << rms.status().to_string();
  EXPECT_EQ(rms->find("y")->shape, (std::vector<int64_t>{1, 4, 8}));

  // Over 3-D inputs Attention cannot split heads without its head counts: said so, not as a
  // disagreement of ranks found later.
  ModelBuilder a;
  a.set_opset(23);
  a.input("q", {1, 4, 8});
  a.node("Attention", {"q", "q", "q"}, "y", "attention");
  a.output("y", {1, 4, 8});
  auto headless = import_onnx(a.bytes(), "attention.onnx");
  ASSERT_FALSE(headless.ok());
  EXPECT_THAT(headless.status().message(), HasSubstr("q_num_heads and kv_num_heads"));

  ModelBuilder n;
  n.set_opset(23);
  n.input("x", {1, 4, 8});
  n.node("RotaryEmbedding", {"x"}, "a", "rotary_1");
  n.node("RotaryEmbedding", {"a"}, "b", "rotary_2");
  n.node("Relu", {"b"}, "y", "relu");
  n.output("y", {1, 4, 8});
  auto refused = import_onnx(n.bytes(), "rotary.onnx");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("opset 23"));
  EXPECT_THAT(refused.status().message(), HasSubstr("RotaryEmbedding"));
  EXPECT_THAT(refused.status().message(), HasSubstr("nodes 'rotary_1', 'rotary_2'"));
  EXPECT_THAT(refused.status().message(), ::testing::Not(HasSubstr("Relu")));
}

// A model whose weights are in a file beside it: read from its folder and nowhere else.
class ExternalData : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fmt::format("{}/external_data_{}", ::testing::TempDir(), getpid());
    std::filesystem::create_directories(root_ + "/model");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  // A MatMul by weight `w` kept at `location`; the data is written to `data_path` (under root_).
  std::string write(const std::string& location, const std::string& data_path, int64_t offset = 0) {
    ModelBuilder m;
    m.input("x", {1, 4});
    m.weight("w", {4, 3});
    m.node("MatMul", {"x", "w"}, "y", "mm");
    m.output("y", {1, 3});
    std::string data = m.external("w", location, offset);
    std::ofstream(root_ + "/" + data_path, std::ios::binary) << std::string(static_cast<size_t>(offset), '\0') << data;
    std::string path = root_ + "/model/m.onnx";
    std::ofstream(path, std::ios::binary) << m.bytes();
    return path;
  }
  std::string root_;
};

TEST_F(ExternalData, TheFileBesideTheModelIsRead) {
  std::string path = write("m.onnx.data", "model/m.onnx.data", 128);
  auto g = import_onnx_file(path);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const Value* w = g->find("w");
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->floats.size(), 12u);
  EXPECT_FLOAT_EQ(w->floats[0], 0.5f);
  EXPECT_FLOAT_EQ(w->floats[8], 0.51f);
  // tunerd takes models as bytes: one that names a file is refused before anything opens it.
  auto bytes = import_onnx(read_file(path), "uploaded.onnx");
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(bytes.status().message(), HasSubstr("tensor 'w' keeps its data in a file beside the model"));
}

TEST_F(ExternalData, LocationsOutsideTheModelsFolderAreRefused) {
  std::string up = write("../w.data", "w.data");
  auto climbed = read_model_with_external_data(up, kMaxModelBytes);
  ASSERT_FALSE(climbed.ok());
  EXPECT_THAT(climbed.status().message(), HasSubstr("location '../w.data' leaves the model's folder"));
  std::string absolute = write(root_ + "/w.data", "w.data");
  auto abs = read_model_with_external_data(absolute, kMaxModelBytes);
  ASSERT_FALSE(abs.ok());
  EXPECT_THAT(abs.status().message(), HasSubstr("is not a file name relative to the model's folder"));
  std::filesystem::create_symlink(root_ + "/w.data", root_ + "/model/link.data");
  std::string linked = write("link.data", "w.data");
  auto link = read_model_with_external_data(linked, kMaxModelBytes);
  ASSERT_FALSE(link.ok());
  EXPECT_THAT(link.status().message(), HasSubstr("resolves outside the model's folder"));
}

TEST_F(ExternalData, RangesAreCheckedAgainstTheFileAndTheTensor) {
  std::string path = write("m.onnx.data", "model/m.onnx.data");
  std::filesystem::resize_file(root_ + "/model/m.onnx.data", 40);
  auto short_file = read_model_with_external_data(path, kMaxModelBytes);
  ASSERT_FALSE(short_file.ok());
  EXPECT_THAT(short_file.status().message(), HasSubstr("lie past its end (40 bytes)"));
  auto missing = read_model_with_external_data(write("nowhere.data", "model/other.data"), kMaxModelBytes);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("cannot open 'nowhere.data' beside the model"));
  std::string whole = write("m.onnx.data", "model/m.onnx.data");
  auto small = read_model_with_external_data(whole, std::filesystem::file_size(whole) + 10);
  ASSERT_FALSE(small.ok());
  EXPECT_THAT(small.status().message(), HasSubstr("the model with its data is over"));
}

// Small models as today's exporters write them, by the current onnx package (build/venv's): at
// its own IR version, weights in a file beside the model, at every opset from 13 to its newest.
class ExporterPatterns : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fmt::format("{}/exporter_patterns_{}", ::testing::TempDir(), getpid());
    std::string error = testing::write_exporter_patterns(dir_);
    ASSERT_TRUE(error.empty()) << error;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string model(const std::string& name) { return dir_ + "/" + name; }
  static std::string dir_;
};
std::string ExporterPatterns::dir_;

TEST_F(ExporterPatterns, EveryOpsetOfTheCurrentOnnxPackageImportsWithTheSameTasks) {
  std::vector<std::string> first;
  int opsets = 0;
  for (int opset = 13; opset <= kNewestOpset; ++opset) {
    std::string path = model(fmt::format("mobilenet_v3_block_opset{}.onnx", opset));
    if (!std::filesystem::exists(path)) continue;
    ++opsets;
    onnx::ModelProto proto;
    ASSERT_TRUE(proto.ParseFromString(read_file(path)));
    EXPECT_GT(proto.ir_version(), onnx::IR_VERSION) << "written at the package's own IR version";
    EXPECT_TRUE(std::filesystem::exists(path + ".data"));
    auto graph = import_onnx_file(path);
    ASSERT_TRUE(graph.ok()) << graph.status().to_string();
    auto table = extract_tasks(*graph);
    ASSERT_TRUE(table.ok()) << table.status().to_string();
    std::vector<std::string> tasks;
    for (const Task& t : table->tasks) tasks.push_back(fmt::format("{} x{}", t.workload.to_string(), t.count));
    if (first.empty()) first = tasks;
    EXPECT_EQ(tasks, first) << "opset " << opset;
  }
  EXPECT_GE(opsets, 8) << "opsets 13 to 20 at least";
}

}  // namespace
}  // namespace tunefarm::model
