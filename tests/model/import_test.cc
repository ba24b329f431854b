#include "model/onnx_import.h"

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
  EXPECT_THAT(found.status().message(), HasSubstr("external file"));
  EXPECT_EQ(found.status().message(), missing.status().message());
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

}  // namespace
}  // namespace tunefarm::model
