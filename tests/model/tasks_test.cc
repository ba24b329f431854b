#include "model/tasks.h"

#include <cmath>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/operators/operator.h"
#include "model/onnx_import.h"
#include "model/passes/passes.h"
#include "model/program.h"
#include "model/passes/fold_batch_norm.h"
#include "tests/model/model_test_util.h"

namespace tunefarm::model {
namespace {

using ::testing::HasSubstr;
using testing::ModelBuilder;
using testing::test_model;

int count_ops(const Graph& g, std::initializer_list<const char*> ops) {
  int n = 0;
  for (const Node& node : g.nodes)
    for (const char* op : ops) n += node.op == op;
  return n;
}

// The counts sum to the model's convolution and matrix-multiply nodes, and each convolution's
// workload gives the output shape that ONNX's shape inference gave its node.
void expect_tasks_match_the_model(const std::string& file, int expected_nodes, const ImportOptions& options = {}) {
  auto graph = import_onnx_file(test_model(file), options);
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  int tunable = count_ops(*graph, {"Conv", "Gemm", "MatMul"});
  EXPECT_EQ(tunable, expected_nodes) << file;
  for (const Node& node : graph->nodes) {
    if (node.op != "Conv") continue;
    auto w = workload_of(*graph, node);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    const Value* out = graph->find(node.outputs[0]);
    ASSERT_NE(out, nullptr);
    operators::ConvShape conv = operators::conv_shape(*w);
    EXPECT_EQ(out->shape[2], conv.P) << node.name << " " << w->to_string();
    EXPECT_EQ(out->shape[1], conv.K) << node.name;
  }
  auto table = extract_tasks(*graph);
  ASSERT_TRUE(table.ok()) << file << ": " << table.status().to_string();
  int counted = 0;
  double share = 0;
  std::map<std::string, const Task*> own;
  std::vector<const Task*> alternatives;
  for (const Task& t : table->tasks) {
    EXPECT_GT(t.flops, 0);
    EXPECT_EQ(static_cast<int>(t.nodes.size()), t.count);
    if (!t.alternative_of.empty()) {
      alternatives.push_back(&t);
      continue;
    }
    own[t.workload.to_string()] = &t;
    counted += t.count;
    share += t.share;
  }
  EXPECT_EQ(counted, tunable) << file;
  EXPECT_EQ(table->tunable_nodes, tunable);
  EXPECT_NEAR(share, 1.0, 1e-9);
  for (size_t i = 1; i < table->tasks.size(); ++i) EXPECT_GE(table->tasks[i - 1].share, table->tasks[i].share);
  // Each other form computes the nodes of its workload, which is a task listed before it, with
  // the same FLOPs.
  for (const Task* a : alternatives) {
    ASSERT_TRUE(own.count(a->alternative_of)) << a->workload.to_string();
    EXPECT_LT(own[a->alternative_of], a) << a->workload.to_string();
    const Task& of = *own[a->alternative_of];
    EXPECT_EQ(a->nodes, of.nodes);
    EXPECT_DOUBLE_EQ(a->flops, of.flops);
    EXPECT_DOUBLE_EQ(a->share, of.share);
    ASSERT_TRUE(winograd_form(of.workload).has_value());
    EXPECT_EQ(a->workload, *winograd_form(of.workload));
  }
}

TEST(ModelTasks, ResNetMobileNetAndBertTasksMatchTheirModels) {
  expect_tasks_match_the_model("resnet50_small.onnx", 18);
  expect_tasks_match_the_model("mobilenet_v2_small.onnx", 17);
  ImportOptions bert;
  bert.input_shapes["hidden_states"] = {1, 16, 64};
  expect_tasks_match_the_model("bert_layer_small.onnx", 8, bert);
  expect_tasks_match_the_model("vit_block_small.onnx", 6);
  expect_tasks_match_the_model("minilm_layer_small.onnx", 8);
}

// The full-size models: ResNet-50 v1.5 has 53 convolutions and a classifier, MobileNetV2 52 and a
// classifier, a BERT-base layer 8 matrix multiplies (Q, K, V, scores, context, output, two FFN), as
// has the MiniLM layer; the ViT block 6 (Q, K and V in one).
TEST(ModelTasks, FullSizeModelsGiveTheirWholeTaskTables) {
  expect_tasks_match_the_model("resnet50.onnx", 54);
  expect_tasks_match_the_model("mobilenet_v2.onnx", 53);
  ImportOptions bert;
  bert.input_shapes["hidden_states"] = {1, 128, 768};
  expect_tasks_match_the_model("bert_layer.onnx", 8, bert);
  expect_tasks_match_the_model("vit_block.onnx", 6);
  expect_tasks_match_the_model("minilm_layer.onnx", 8);
  auto graph = import_onnx_file(test_model("resnet50.onnx"));
  ASSERT_TRUE(graph.ok());
  auto table = extract_tasks(*graph);
  ASSERT_TRUE(table.ok());
  // 4.1 G multiply-adds, as the literature counts ResNet-50.
  EXPECT_NEAR(table->total_flops / 2e9, 4.1, 0.1);
  // Convolutions run channel-blocked, the first layer's three colour channels in blocks of one
  // (NCHW as the input comes), with their bias (the folded BatchNormalization) and ReLU in the
  // kernel.
  EXPECT_EQ(table->tasks.front().workload.to_string(),
            "conv2d_nchwc:N=1,C=256,H=14,W=14,K=256,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16,bias=1,relu=1");
  bool first_layer = false;
  for (const Task& t : table->tasks)
    first_layer |= t.workload.op == "conv2d_nchwc" && t.workload.param("C") == 3 && t.workload.param("ic_block") == 1;
  EXPECT_TRUE(first_layer);
  EXPECT_EQ(table->tasks.front().count, 5);
  // The 3x3 convolutions at stride 1 are also tuned as Winograd's F(4x4) (56x56, 28x28 and 14x14
  // maps); at 7x7 the direct kernel is the only form.
  std::map<std::string, std::string> forms;
  for (const Task& t : table->tasks)
    if (!t.alternative_of.empty()) forms[t.alternative_of] = t.workload.to_string();
  EXPECT_EQ(forms.size(), 3u);
  const std::string s14 = table->tasks.front().workload.to_string();
  EXPECT_EQ(forms[s14], s14 + ",winograd=4");
  EXPECT_EQ(forms["conv2d_nchwc:N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16,bias=1,relu=1"],
            "conv2d_nchwc:N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16,bias=1,relu=1,winograd=4");
  EXPECT_EQ(forms.count("conv2d_nchwc:N=1,C=512,H=7,W=7,K=512,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16,bias=1,relu=1"), 0u);
}

// F(4x4) from 12x12 up to 256 channels each way; F(2x2) on smaller maps and wider layers (at 512
// channels F(4x4) ran slower than the direct kernel at 14x14, F(2x2) 1.6x faster); none below 8x8.
TEST(ModelTasks, AWinogradFormTakesItsTileByTheMapAndTheChannels) {
  auto form_of = [](const std::string& shape) -> std::string {
    auto w = parse_workload("conv2d_nchwc:N=1," + shape + ",R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16");
    EXPECT_TRUE(w.ok()) << shape;
    auto form = winograd_form(*w);
    return form ? form->to_string().substr(form->to_string().rfind(',') + 1) : "direct";
  };
  EXPECT_EQ(form_of("C=256,H=14,W=14,K=256"), "winograd=4");
  EXPECT_EQ(form_of("C=512,H=14,W=14,K=512"), "winograd=2");
  EXPECT_EQ(form_of("C=256,H=14,W=14,K=512"), "winograd=2");
  EXPECT_EQ(form_of("C=64,H=10,W=10,K=64"), "winograd=2");
  EXPECT_EQ(form_of("C=512,H=7,W=7,K=512"), "direct");
}

TEST(ModelTasks, ConvolutionsAndDenseLayersCarryTheirShapesAndEpilogues) {
  auto graph = import_onnx_file(test_model("mobilenet_v2_small.onnx"));
  ASSERT_TRUE(graph.ok());
  auto table = extract_tasks(*graph);
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  bool depthwise = false, classifier = false, expand = false, project_residual = false;
  for (const Task& t : table->tasks) {
    depthwise |= t.workload.op.starts_with("depthwise_conv2d");
    classifier |= t.workload.to_string() == "dense:M=1,N=10,K=320,bias=1";
    // Blocked convolutions take their bias, a residual add and ReLU6 into the kernel: the
    // expansions end in ReLU6, the projections of repeated blocks add the block's input.
    bool blocked = t.workload.op.ends_with("_nchwc");
    EXPECT_TRUE(!blocked || t.workload.param("bias")) << t.workload.to_string();
    expand |= blocked && t.workload.param("relu6") && !t.workload.param("residual");
    project_residual |= blocked && t.workload.param("residual") && !t.workload.param("relu6");
  }
  EXPECT_TRUE(depthwise);
  EXPECT_TRUE(classifier);
  EXPECT_TRUE(expand);
  EXPECT_TRUE(project_residual);
  // BatchNormalization is folded, ReLU6 joins its convolution: neither is left as a node.
  EXPECT_EQ(table->untuned_ops.count("BatchNormalization"), 0u);
  EXPECT_EQ(table->untuned_ops.count("Clip"), 0u);

  ImportOptions options;
  options.input_shapes["hidden_states"] = {1, 16, 64};
  auto bert = import_onnx_file(test_model("bert_layer_small.onnx"), options);
  ASSERT_TRUE(bert.ok());
  auto tasks = extract_tasks(*bert);
  ASSERT_TRUE(tasks.ok()) << tasks.status().to_string();
  std::map<std::string, int> counts;
  for (const Task& t : tasks->tasks) counts[t.workload.to_string()] = t.count;
  // Q, K, V and the output projection: MatMul + Add of a transposed weight is a dense layer with a
  // bias, its constant weight packed into the default register tile's panels (8x32 here) at build time.
  EXPECT_EQ(counts["dense:M=16,N=64,K=64,bias=1,w_block=32"], 4);
  // The FFN's first layer computes its GELU in the kernel's epilogue.
  EXPECT_EQ(counts["dense:M=16,N=128,K=64,bias=1,gelu=1,w_block=32"], 1);
  EXPECT_EQ(counts["dense:M=16,N=64,K=128,bias=1,w_block=32"], 1);
  EXPECT_EQ(counts["batch_matmul:B=2,M=16,N=16,K=32"], 1);
  EXPECT_EQ(counts["batch_matmul:B=2,M=16,N=32,K=16"], 1);
  EXPECT_GT(tasks->untuned_ops["Softmax"], 0);
  // The exporter's decomposed LayerNorm and Erf-GELU are one operator each; each LayerNorm with
  // the residual Add before it (SkipLayerNormalization).
  EXPECT_EQ(tasks->untuned_ops["SkipLayerNormalization"], 2);
  EXPECT_EQ(tasks->untuned_ops.count("LayerNormalization"), 0u);
  // What the tasks' figures miss: the steps outside the kernels and their bytes.
  EXPECT_GT(tasks->other_steps, 3);
  EXPECT_GT(tasks->other_bytes, 3 * 16 * 64 * 4);
  EXPECT_EQ(tasks->untuned_ops.count("Gelu"), 0u);
  for (const char* piece : {"ReduceMean", "Pow", "Sqrt", "Erf"}) EXPECT_EQ(tasks->untuned_ops.count(piece), 0u) << piece;
}

// A run of the built model touches its weights once and its activations in one arena: less than
// its tasks' arguments counted at every occurrence, at least its weights. Elementwise steps and
// pooling are the part of the other steps' bytes that streams.
TEST(ModelTasks, ARunTouchesItsWeightsOnceAndItsActivationsInTheArena) {
  auto graph = import_onnx_file(test_model("mobilenet_v2_small.onnx"));
  ASSERT_TRUE(graph.ok());
  double weights = 0;
  for (const Node& node : graph->nodes)
    if (node.op == "Conv" || node.op == "Gemm") weights += 4.0 * static_cast<double>(graph->find(node.inputs[1])->elements());
  auto table = extract_tasks(*graph);
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  double per_occurrence = table->other_bytes;
  for (const Task& t : table->tasks)
    for (const operators::TensorArg& arg : operators::tensor_args(t.workload))
      per_occurrence += 4.0 * t.count * static_cast<double>(arg.num_elements());
  EXPECT_GE(table->run_bytes, weights);
  EXPECT_LT(table->run_bytes, per_occurrence);
  EXPECT_GE(table->other_streaming_bytes, 0);
  EXPECT_LE(table->other_streaming_bytes, table->other_bytes);

  ImportOptions options;
  options.input_shapes["hidden_states"] = {1, 16, 64};
  auto bert = import_onnx_file(test_model("bert_layer_small.onnx"), options);
  ASSERT_TRUE(bert.ok());
  auto layer = extract_tasks(*bert);
  ASSERT_TRUE(layer.ok()) << layer.status().to_string();
  // A transformer layer's other steps are Softmax, LayerNorms and transposes: none streams.
  EXPECT_GT(layer->other_bytes, 0);
  EXPECT_EQ(layer->other_streaming_bytes, 0);

  // A convolution with a Winograd form counts its weight as the larger, transformed one (each of
  // its nodes): ResNet's 3x3 convolutions at stride 1.
  auto resnet = import_onnx_file(test_model("resnet50_small.onnx"));
  ASSERT_TRUE(resnet.ok());
  double direct = 0, biases = 0;
  for (const Node& node : resnet->nodes) {
    if (node.op != "Conv" && node.op != "Gemm") continue;
    const Value* w = resnet->find(node.inputs[1]);
    direct += 4.0 * static_cast<double>(w->elements());
    biases += 4.0 * static_cast<double>(w->shape[0]);
  }
  auto convs = extract_tasks(*resnet);
  ASSERT_TRUE(convs.ok()) << convs.status().to_string();
  double more = 0;
  for (const Task& t : convs->tasks) {
    if (t.alternative_of.empty()) continue;
    auto of = parse_workload(t.alternative_of);
    ASSERT_TRUE(of.ok());
    more += 4.0 * t.count * static_cast<double>(operators::tensor_args(t.workload)[1].num_elements() -
                                                operators::tensor_args(*of)[1].num_elements());
  }
  ASSERT_GT(more, 0);
  Graph passed = *resnet;
  ASSERT_TRUE(run_passes(passed).ok());
  auto program = lower_graph(passed);
  ASSERT_TRUE(program.ok());
  double arena = static_cast<double>(plan_memory(*program).arena_bytes);
  // The arena, the weights (the transformed ones' extra), a bias per output channel, the image and
  // the scores.
  EXPECT_NEAR(convs->run_bytes, arena + direct + more + biases + 4.0 * (3 * 64 * 64 + 10), 1024);
}

// The same layer as exporters write it at opset 17 (LayerNormalization as one operator, small
// constants as Constant nodes, weights behind Transpose nodes) gives the same tasks.
TEST(ModelTasks, AnOpset17ExportGivesTheSameTasks) {
  ImportOptions options;
  options.input_shapes["hidden_states"] = {1, 16, 64};
  std::map<std::string, int> counts[2];
  std::map<std::string, int> untuned[2];
  int i = 0;
  for (const char* file : {"bert_layer_small.onnx", "bert_layer_opset17_small.onnx"}) {
    auto graph = import_onnx_file(test_model(file), options);
    ASSERT_TRUE(graph.ok()) << file << ": " << graph.status().to_string();
    auto table = extract_tasks(*graph);
    ASSERT_TRUE(table.ok()) << file << ": " << table.status().to_string();
    for (const Task& t : table->tasks) counts[i][t.workload.to_string()] = t.count;
    untuned[i] = table->untuned_ops;
    ++i;
  }
  EXPECT_EQ(counts[0], counts[1]);
  EXPECT_EQ(untuned[1]["SkipLayerNormalization"], 2);
  EXPECT_EQ(untuned[1].count("Transpose") ? untuned[1]["Transpose"] : 0, untuned[0]["Transpose"])
      << "the weights' Transpose nodes fold into constants";
}

TEST(ModelTasks, BatchNormalizationFoldsIntoTheConvolutionWeights) {
  ModelBuilder m;
  m.input("x", {1, 2, 4, 4});
  m.weight("w", {3, 2, 1, 1}, 1.0f);
  m.weight("scale", {3}, 2.0f);
  m.weight("shift", {3}, 0.5f);
  m.weight("mean", {3}, 0.25f);
  m.weight("var", {3}, 3.0f);
  m.node("Conv", {"x", "w"}, "c", "conv");
  m.node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, "y", "bn");
  m.output("y", {1, 3, 4, 4});
  auto g = import_onnx(m.bytes(), "bn.onnx");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_NE(g->find("w"), nullptr);
  const std::vector<float> w = g->find("w")->floats, scale = g->find("scale")->floats;
  const std::vector<float> shift = g->find("shift")->floats, mean = g->find("mean")->floats, var = g->find("var")->floats;
  auto folded = fold_batch_norm(*g);
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(*folded, 1);
  ASSERT_EQ(g->nodes.size(), 1u);
  const Node& conv = g->nodes[0];
  EXPECT_EQ(conv.outputs[0], "y");
  const Value* fw = g->find(conv.inputs[1]);
  const Value* fb = g->find(conv.inputs[2]);
  ASSERT_TRUE(fw && fb);
  for (int k = 0; k < 3; ++k) {
    float s = scale[k] / std::sqrt(var[k] + 1e-5f);
    EXPECT_FLOAT_EQ(fw->floats[k * 2], w[k * 2] * s);
    EXPECT_FLOAT_EQ(fb->floats[k], (0 - mean[k]) * s + shift[k]);
  }
}

// A grouped convolution (RegNet, ResNeXt) runs as one group's convolution per group: one task,
// counted once per group; a depthwise convolution with several filters per channel, as one filter per repeated channel.
TEST(ModelTasks, GroupedConvolutionsAreAConvolutionPerGroup) {
  ModelBuilder m;
  m.input("x", {1, 4, 8, 8});
  m.weight("w", {4, 2, 3, 3});
  auto* conv = m.node("Conv", {"x", "w"}, "y", "grouped_conv");
  ModelBuilder::integer(conv, "group", 2);
  m.output("y", {1, 4, 6, 6});
  auto g = import_onnx(m.bytes(), "grouped.onnx");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto t = extract_tasks(*g);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_EQ(t->tasks.size(), 1u);
  EXPECT_EQ(t->tasks[0].workload.param("C"), 2);
  EXPECT_EQ(t->tasks[0].workload.param("K"), 2);
  EXPECT_EQ(t->tasks[0].count, 2);
  EXPECT_EQ(t->tunable_nodes, 2);
  // A batch of one stays one node, whose step calls the group's kernel for each group; in a larger
  // batch a group's channels are not one range: a node per group.
  EXPECT_EQ(t->tasks[0].nodes, (std::vector<std::string>{"grouped_conv"}));
  ModelBuilder two;
  two.input("x", {2, 4, 8, 8});
  two.weight("w", {4, 2, 3, 3});
  ModelBuilder::integer(two.node("Conv", {"x", "w"}, "y", "grouped_conv"), "group", 2);
  two.output("y", {2, 4, 6, 6});
  auto g2 = import_onnx(two.bytes(), "grouped_batch.onnx");
  ASSERT_TRUE(g2.ok()) << g2.status().to_string();
  auto t2 = extract_tasks(*g2);
  ASSERT_TRUE(t2.ok()) << t2.status().to_string();
  ASSERT_EQ(t2->tasks.size(), 1u);
  EXPECT_EQ(t2->tasks[0].count, 2);
  EXPECT_EQ(t2->tasks[0].nodes, (std::vector<std::string>{"grouped_conv/group0", "grouped_conv/group1"}));

  ModelBuilder d;
  d.input("x", {1, 4, 8, 8});
  d.weight("w", {8, 1, 3, 3});
  ModelBuilder::integer(d.node("Conv", {"x", "w"}, "y", "multiplier_conv"), "group", 4);
  d.output("y", {1, 8, 6, 6});
  auto dg = import_onnx(d.bytes(), "multiplier.onnx");
  ASSERT_TRUE(dg.ok()) << dg.status().to_string();
  // Two filters per channel (PiT, FastViT): a depthwise convolution of one filter per channel over
  // the input's channels each repeated twice.
  auto multiplier = extract_tasks(*dg);
  ASSERT_TRUE(multiplier.ok()) << multiplier.status().to_string();
  ASSERT_EQ(multiplier->tasks.size(), 1u);
  EXPECT_EQ(multiplier->tasks[0].workload.op.rfind("depthwise_conv2d", 0), 0u) << multiplier->tasks[0].workload.op;
  EXPECT_EQ(multiplier->tasks[0].workload.param("C"), 8);
  EXPECT_EQ(multiplier->tasks[0].nodes, (std::vector<std::string>{"multiplier_conv"}));
}

// Nothing is tuned for a model the build cannot run: the table is refused, naming every node.
TEST(ModelTasks, AModelWithOperatorsTheBuildCannotRunIsRefusedNamingEachNode) {
  auto graph = import_onnx_file(test_model("unbuildable_small.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  auto table = extract_tasks(*graph);
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.status().message(), ::testing::HasSubstr("2 nodes cannot be built"));
  EXPECT_THAT(table.status().message(), ::testing::HasSubstr("node 'lp_norm' (LpNormalization)"));
  EXPECT_THAT(table.status().message(), ::testing::HasSubstr("node 'determinant' (Det)"));
}

// Token ids and a mask come in as the file types them; a type the build does not take is refused
// before anything is tuned, naming the input.
TEST(ModelTasks, IntegerInputsAreTakenAndOtherTypesRefusedByName) {
  auto graph = import_onnx_file(test_model("token_encoder_small.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  EXPECT_EQ(graph->find("input_ids")->dtype, "int64");
  EXPECT_EQ(graph->find("attention_mask")->dtype, "int64");
  Graph bytes = *graph;
  auto table = extract_tasks(*graph);
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  EXPECT_FALSE(table->tasks.empty());
  bytes.find("attention_mask")->dtype = "UINT8";
  auto refused = extract_tasks(bytes);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              ::testing::HasSubstr("input 'attention_mask' is UINT8: a built model takes float32, int64, int32 or bool inputs"));
}

}  // namespace
}  // namespace tunefarm::model
