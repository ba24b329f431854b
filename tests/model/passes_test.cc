// The model passes one by one, on small graphs built in code: what each rewrites, and what it must
// leave alone. (Whole models through all of them: tasks_test.cc and build_test.cc.)
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "model/graph.h"
#include "model/passes/compose_movement.h"
#include "model/passes/decompose.h"
#include "model/passes/fold_constants.h"
#include "model/passes/fuse_patterns.h"
#include "model/passes/fuse_row_inputs.h"
#include "model/passes/group_epilogues.h"
#include "model/passes/pad_channels.h"
#include "model/passes/passes.h"
#include "model/passes/unary_before_views.h"

namespace tunefarm::model {
namespace {

class GraphBuilder {
 public:
  Graph g;

  void value(const std::string& name, std::vector<int64_t> shape) {
    Value& v = g.values[name];
    v.name = name;
    v.shape = std::move(shape);
  }
  void constant(const std::string& name, std::vector<int64_t> shape, std::vector<float> data) {
    value(name, std::move(shape));
    g.values[name].constant = true;
    g.values[name].floats = std::move(data);
  }
  void scalar(const std::string& name, float x) { constant(name, {}, {x}); }
  Node& node(const std::string& op, std::vector<std::string> inputs, const std::string& output) {
    Node n;
    n.name = output + "_node";
    n.op = op;
    n.inputs = std::move(inputs);
    n.outputs = {output};
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  }
};

std::vector<std::string> ops_of(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op);
  return ops;
}

TEST(FoldConstants, TransposedAndCastWeightsBecomeConstantsAndComputedValuesStay) {
  GraphBuilder b;
  b.constant("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  b.value("wt", {3, 2});
  b.node("Transpose", {"w"}, "wt").attributes["perm"].ints = {1, 0};
  b.value("x", {3, 2});
  b.value("xt", {2, 3});
  b.node("Transpose", {"x"}, "xt").attributes["perm"].ints = {1, 0};
  b.constant("i", {2}, {});
  b.g.values["i"].is_float = false;
  b.g.values["i"].ints = {7, 8};
  b.value("f", {2});
  b.node("Cast", {"i"}, "f").attributes["to"].i = 1;  // FLOAT
  b.value("k", {2});
  b.node("Cast", {"i"}, "k").attributes["to"].i = 7;  // INT64: shape values stay integers
  b.value("n", {2});
  b.node("Cast", {"i"}, "n").attributes["to"].i = 10;  // FLOAT16: not what the kernels read
  b.g.inputs = {"x"};
  auto folded = fold_constants(b.g);
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(*folded, 3);
  EXPECT_EQ(ops_of(b.g), (std::vector<std::string>{"Transpose", "Cast"}));
  EXPECT_EQ(b.g.nodes[0].inputs[0], "x");
  const Value* wt = b.g.find("wt");
  ASSERT_TRUE(wt && wt->constant);
  EXPECT_EQ(wt->shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(wt->floats, (std::vector<float>{1, 4, 2, 5, 3, 6}));
  const Value* f = b.g.find("f");
  ASSERT_TRUE(f && f->constant && f->is_float);
  EXPECT_EQ(f->floats, (std::vector<float>{7, 8}));
  const Value* k = b.g.find("k");
  ASSERT_TRUE(k && k->constant && !k->is_float);
  EXPECT_EQ(k->ints, (std::vector<int64_t>{7, 8}));
}

// x / sqrt(2) -> Erf -> + 1 -> * x -> * 0.5, as PyTorch exports GELU.
void gelu_chain(GraphBuilder& b, float one) {
  b.value("x", {4});
  b.scalar("sqrt2", std::sqrt(2.f));
  b.scalar("one", one);
  b.scalar("half", 0.5f);
  for (const char* v : {"d", "e", "a", "m", "y"}) b.value(v, {4});
  b.node("Div", {"x", "sqrt2"}, "d");
  b.node("Erf", {"d"}, "e");
  b.node("Add", {"e", "one"}, "a");
  b.node("Mul", {"x", "a"}, "m");
  b.node("Mul", {"m", "half"}, "y");
  b.g.inputs = {"x"};
  b.g.outputs = {"y"};
}

// conv [1, 8, 1, 6] -> Reshape [1, 8, 6] -> Gelu -> Reshape [1, 8, 1, 6] -> conv: the Gelu runs on
// the map and both Reshapes go; a Reshape's output read twice, or a graph output, keeps its place.
TEST(UnaryBeforeViews, AGeluBetweenTwoRowMapsRunsOnTheMap) {
  GraphBuilder b;
  b.value("x", {1, 8, 1, 6});
  b.value("flat", {1, 8, 6});
  b.value("g", {1, 8, 6});
  b.value("row", {1, 8, 1, 6});
  b.value("y", {1, 8, 1, 6});
  b.g.inputs = {"x"};
  b.g.outputs = {"y"};
  b.node("Reshape", {"x", "s3"}, "flat");
  b.node("Gelu", {"flat"}, "g");
  b.node("Reshape", {"g", "s4"}, "row");
  b.node("Relu", {"row"}, "y");
  auto moved = unary_before_views(b.g);
  ASSERT_TRUE(moved.ok()) << moved.status().to_string();
  EXPECT_EQ(*moved, 1);
  EXPECT_EQ(ops_of(b.g), (std::vector<std::string>{"Gelu", "Relu"}));
  EXPECT_EQ(b.g.nodes[0].inputs[0], "x");
  EXPECT_EQ(b.g.nodes[1].inputs[0], b.g.nodes[0].outputs[0]);
  ASSERT_NE(b.g.find(b.g.nodes[0].outputs[0]), nullptr);
  EXPECT_EQ(b.g.find(b.g.nodes[0].outputs[0])->shape, (std::vector<int64_t>{1, 8, 1, 6}));

  GraphBuilder twice;
  twice.value("x", {1, 8, 1, 6});
  twice.value("flat", {1, 8, 6});
  twice.value("g", {1, 8, 6});
  twice.g.inputs = {"x"};
  twice.g.outputs = {"g", "flat"};
  twice.node("Reshape", {"x", "s3"}, "flat");
  twice.node("Gelu", {"flat"}, "g");
  moved = unary_before_views(twice.g);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(*moved, 0);
  EXPECT_EQ(ops_of(twice.g), (std::vector<std::string>{"Reshape", "Gelu"}));
}

TEST(FusePatterns, AnErfChainBecomesOneGeluNode) {
  GraphBuilder b;
  gelu_chain(b, 1.f);
  auto fused = fuse_patterns(b.g);
  ASSERT_TRUE(fused.ok());
  EXPECT_EQ(*fused, 1);
  ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"Gelu"}));
  EXPECT_EQ(b.g.nodes[0].inputs, (std::vector<std::string>{"x"}));
  EXPECT_EQ(b.g.nodes[0].outputs, (std::vector<std::string>{"y"}));
  EXPECT_EQ(b.g.nodes[0].sources.size(), 5u);
}

TEST(FusePatterns, AChainThatOnlyLooksLikeGeluStays) {
  GraphBuilder b;
  gelu_chain(b, 2.f);  // erf(x / sqrt 2) + 2 is not GELU
  auto fused = fuse_patterns(b.g);
  ASSERT_TRUE(fused.ok());
  EXPECT_EQ(*fused, 0);
  EXPECT_EQ(b.g.nodes.size(), 5u);
}

// GPT-2's gelu_new from x and the constants three, k (0.044715), c (sqrt(2/pi)), one and half:
// 0.5x (1 + tanh(c (x + k x^3))), the 0.5 first.
void gelu_new(GraphBuilder& b) {
  b.node("Pow", {"x", "three"}, "p");
  b.node("Mul", {"p", "k"}, "kp");
  b.node("Add", {"x", "kp"}, "inner");
  b.node("Mul", {"inner", "c"}, "z");
  b.node("Tanh", {"z"}, "t");
  b.node("Add", {"t", "one"}, "t1");
  b.node("Mul", {"x", "half"}, "hx");
  b.node("Mul", {"hx", "t1"}, "y");
}

// GELU's tanh approximation as exporters write it: GPT-2's gelu_new (Pow, the 0.5 first), the
// dynamo exporter's (constants first, the 0.5 last), and x * x * x with the constant rounded as
// Hugging Face's FastGELU writes it; and erf's form with a Mul by 1/sqrt(2). Each becomes one Gelu
// node, approximate "tanh" where it is the approximation.
TEST(FusePatterns, GeluWrittenAnyWayIsRecognizedByTheFunctionItComputes) {
  struct Form {
    const char* name;
    bool tanh;
    std::function<void(GraphBuilder&)> write;
  };
  const Form forms[] = {
      {"gpt2", true, gelu_new},
      {"dynamo", true,
       [](GraphBuilder& b) {
         b.node("Pow", {"x", "three"}, "p");
         b.node("Mul", {"k", "p"}, "kp");
         b.node("Add", {"x", "kp"}, "inner");
         b.node("Mul", {"c", "inner"}, "z");
         b.node("Tanh", {"z"}, "t");
         b.node("Add", {"t", "one"}, "t1");
         b.node("Mul", {"x", "t1"}, "xt");
         b.node("Mul", {"half", "xt"}, "y");
       }},
      {"cubed", true,
       [](GraphBuilder& b) {
         b.node("Mul", {"x", "x"}, "x2");
         b.node("Mul", {"x2", "x"}, "p");
         b.node("Mul", {"p", "k"}, "kp");
         b.node("Add", {"kp", "x"}, "inner");
         b.node("Mul", {"inner", "c_rounded"}, "z");
         b.node("Tanh", {"z"}, "t");
         b.node("Add", {"one", "t"}, "t1");
         b.node("Mul", {"t1", "x"}, "xt");
         b.node("Div", {"xt", "two"}, "y");
       }},
      {"erf_by_mul", false,
       [](GraphBuilder& b) {
         b.node("Mul", {"x", "inv_sqrt2"}, "d");
         b.node("Erf", {"d"}, "e");
         b.node("Add", {"e", "one"}, "a");
         b.node("Mul", {"half", "x"}, "hx");
         b.node("Mul", {"hx", "a"}, "y");
       }},
  };
  for (const Form& form : forms) {
    GraphBuilder b;
    b.value("x", {4});
    b.scalar("three", 3.f);
    b.scalar("k", 0.044715f);
    b.scalar("c", static_cast<float>(std::sqrt(2.0 / M_PI)));
    b.scalar("c_rounded", 0.7978845608f);
    b.scalar("one", 1.f);
    b.scalar("two", 2.f);
    b.scalar("half", 0.5f);
    b.scalar("inv_sqrt2", static_cast<float>(1.0 / std::sqrt(2.0)));
    for (const char* v : {"p", "x2", "kp", "inner", "z", "t", "t1", "hx", "xt", "d", "e", "a", "y"}) b.value(v, {4});
    form.write(b);
    size_t nodes = b.g.nodes.size();
    b.g.inputs = {"x"};
    b.g.outputs = {"y"};
    auto fused = fuse_patterns(b.g);
    ASSERT_TRUE(fused.ok()) << form.name;
    EXPECT_EQ(*fused, 1) << form.name;
    ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"Gelu"})) << form.name;
    const Node& gelu = b.g.nodes[0];
    EXPECT_EQ(gelu.inputs, (std::vector<std::string>{"x"})) << form.name;
    EXPECT_EQ(gelu.outputs, (std::vector<std::string>{"y"})) << form.name;
    EXPECT_EQ(gelu.sources.size(), nodes) << form.name;
    EXPECT_EQ(gelu.attributes.count("approximate") ? gelu.attributes.at("approximate").s : "none", form.tanh ? "tanh" : "none")
        << form.name;
  }
}

// The tanh form with its cubic's constant off (0.04 for 0.044715), and the right chain whose
// tanh something else reads too: neither is replaced.
TEST(FusePatterns, ATanhChainThatIsNotGeluOrIsReadInsideStays) {
  for (bool shared : {false, true}) {
    GraphBuilder b;
    b.value("x", {4});
    b.scalar("three", 3.f);
    b.scalar("k", shared ? 0.044715f : 0.04f);
    b.scalar("c", static_cast<float>(std::sqrt(2.0 / M_PI)));
    b.scalar("one", 1.f);
    b.scalar("half", 0.5f);
    for (const char* v : {"p", "kp", "inner", "z", "t", "t1", "hx", "y", "other"}) b.value(v, {4});
    gelu_new(b);
    b.g.inputs = {"x"};
    b.g.outputs = {"y"};
    if (shared) {
      b.node("Relu", {"t"}, "other");
      b.g.outputs.push_back("other");
    }
    size_t nodes = b.g.nodes.size();
    auto fused = fuse_patterns(b.g);
    ASSERT_TRUE(fused.ok());
    EXPECT_EQ(*fused, 0) << (shared ? "shared tanh" : "wrong constant");
    EXPECT_EQ(b.g.nodes.size(), nodes);
  }
}

// x * Tanh(Softplus(x)), as exporters write Mish before opset 18; times another value it is not.
TEST(FusePatterns, ASoftplusTanhChainTimesItsInputBecomesOneMishNode) {
  for (const char* other : {"x", "z"}) {
    GraphBuilder b;
    for (const char* v : {"x", "z", "p", "t", "y"}) b.value(v, {4});
    b.node("Softplus", {"x"}, "p");
    b.node("Tanh", {"p"}, "t");
    b.node("Mul", {other, "t"}, "y");
    b.g.inputs = {"x", "z"};
    b.g.outputs = {"y"};
    auto fused = fuse_patterns(b.g);
    ASSERT_TRUE(fused.ok());
    if (std::string(other) == "z") {
      EXPECT_EQ(*fused, 0);
      continue;
    }
    EXPECT_EQ(*fused, 1);
    ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"Mish"}));
    EXPECT_EQ(b.g.nodes[0].inputs, (std::vector<std::string>{"x"}));
    EXPECT_EQ(b.g.nodes[0].outputs, (std::vector<std::string>{"y"}));
  }
}

TEST(FusePatterns, TheReduceMeanChainWithItsScaleAndShiftBecomesOneLayerNorm) {
  GraphBuilder b;
  b.value("x", {2, 8});
  for (const char* v : {"mean", "var", "ve", "sd"}) b.value(v, {2, 1});
  for (const char* v : {"d", "sq", "n", "s", "y"}) b.value(v, {2, 8});
  b.scalar("two", 2.f);
  b.scalar("eps", 1e-5f);
  b.constant("gamma", {8}, std::vector<float>(8, 1.5f));
  b.constant("beta", {8}, std::vector<float>(8, 0.25f));
  b.node("ReduceMean", {"x"}, "mean").attributes["axes"].ints = {-1};
  b.node("Sub", {"x", "mean"}, "d");
  b.node("Pow", {"d", "two"}, "sq");
  b.node("ReduceMean", {"sq"}, "var").attributes["axes"].ints = {1};
  b.node("Add", {"var", "eps"}, "ve");
  b.node("Sqrt", {"ve"}, "sd");
  b.node("Div", {"d", "sd"}, "n");
  b.node("Mul", {"n", "gamma"}, "s");
  b.node("Add", {"s", "beta"}, "y");
  b.g.inputs = {"x"};
  b.g.outputs = {"y"};
  auto fused = fuse_patterns(b.g);
  ASSERT_TRUE(fused.ok());
  EXPECT_EQ(*fused, 1);
  ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"LayerNormalization"}));
  const Node& ln = b.g.nodes[0];
  EXPECT_EQ(ln.inputs, (std::vector<std::string>{"x", "gamma", "beta"}));
  EXPECT_EQ(ln.outputs, (std::vector<std::string>{"y"}));
  EXPECT_FLOAT_EQ(ln.float_attr("epsilon", 0), 1e-5f);
  EXPECT_EQ(ln.sources.size(), 9u);
}

// The same chain over the channels of an NCHW map (timm's channels-first LayerNorm2d: the means
// over axis 1) is not a LayerNormalization, which normalizes the last axis: its nodes stay.
TEST(FusePatterns, AReduceMeanChainOverAnotherAxisStays) {
  GraphBuilder b;
  b.value("x", {1, 4, 3, 3});
  for (const char* v : {"mean", "var", "ve", "sd"}) b.value(v, {1, 1, 3, 3});
  for (const char* v : {"d", "sq", "y"}) b.value(v, {1, 4, 3, 3});
  b.scalar("two", 2.f);
  b.scalar("eps", 1e-5f);
  b.node("ReduceMean", {"x"}, "mean").attributes["axes"].ints = {1};
  b.node("Sub", {"x", "mean"}, "d");
  b.node("Pow", {"d", "two"}, "sq");
  b.node("ReduceMean", {"sq"}, "var").attributes["axes"].ints = {1};
  b.node("Add", {"var", "eps"}, "ve");
  b.node("Sqrt", {"ve"}, "sd");
  b.node("Div", {"d", "sd"}, "y");
  b.g.inputs = {"x"};
  b.g.outputs = {"y"};
  auto fused = fuse_patterns(b.g);
  ASSERT_TRUE(fused.ok());
  EXPECT_EQ(*fused, 0);
  EXPECT_EQ(b.g.nodes.size(), 7u);
}

// RMSNorm as LLaMA's exporters write it becomes one node: Pow(2), ReduceMean, Add(eps), Sqrt, then
// Reciprocal and Mul(x) or Div(x), then the weight (on either side) where there is one; a chain
// whose root something else reads, or over another axis, stays.
TEST(FusePatterns, RmsNormWrittenOutBecomesOneNode) {
  struct Form {
    bool reciprocal, weight_first, with_weight, square_by_mul;
  };
  for (Form form : {Form{true, true, true, false}, Form{false, false, true, true}, Form{true, false, false, false}}) {
    GraphBuilder b;
    b.value("x", {2, 8});
    for (const char* v : {"ms", "ve", "rt", "inv"}) b.value(v, {2, 1});
    for (const char* v : {"sq", "n", "y"}) b.value(v, {2, 8});
    b.scalar("two", 2.f);
    b.scalar("eps", 1e-6f);
    b.constant("w", {8}, std::vector<float>(8, 1.5f));
    if (form.square_by_mul) b.node("Mul", {"x", "x"}, "sq");
    else b.node("Pow", {"x", "two"}, "sq");
    b.node("ReduceMean", {"sq"}, "ms").attributes["axes"].ints = {-1};
    b.node("Add", {"ms", "eps"}, "ve");
    b.node("Sqrt", {"ve"}, "rt");
    const char* normed = form.with_weight ? "n" : "y";
    if (form.reciprocal) {
      b.node("Reciprocal", {"rt"}, "inv");
      b.node("Mul", {"x", "inv"}, normed);
    } else {
      b.node("Div", {"x", "rt"}, normed);
    }
    if (form.with_weight) b.node("Mul", form.weight_first ? std::vector<std::string>{"w", "n"} : std::vector<std::string>{"n", "w"}, "y");
    b.g.inputs = {"x"};
    b.g.outputs = {"y"};
    auto fused = fuse_patterns(b.g);
    ASSERT_TRUE(fused.ok());
    EXPECT_EQ(*fused, 1);
    ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"RMSNormalization"}));
    const Node& norm = b.g.nodes[0];
    EXPECT_EQ(norm.inputs, form.with_weight ? (std::vector<std::string>{"x", "w"}) : (std::vector<std::string>{"x"}));
    EXPECT_EQ(norm.outputs, (std::vector<std::string>{"y"}));
    EXPECT_FLOAT_EQ(norm.float_attr("epsilon", 0), 1e-6f);
  }
  GraphBuilder b;
  b.value("x", {2, 8});
  for (const char* v : {"ms", "ve", "rt"}) b.value(v, {2, 1});
  for (const char* v : {"sq", "y"}) b.value(v, {2, 8});
  b.scalar("two", 2.f);
  b.scalar("eps", 1e-6f);
  b.node("Pow", {"x", "two"}, "sq");
  b.node("ReduceMean", {"sq"}, "ms").attributes["axes"].ints = {-1};
  b.node("Add", {"ms", "eps"}, "ve");
  b.node("Sqrt", {"ve"}, "rt");
  b.node("Div", {"x", "rt"}, "y");
  b.g.inputs = {"x"};
  b.g.outputs = {"y", "rt"};
  auto fused = fuse_patterns(b.g);
  ASSERT_TRUE(fused.ok());
  EXPECT_EQ(*fused, 0) << "the root is an output too";
}

// Nodes that copy their input unchanged go, their readers reading the input: Identity, a Cast of
// float32 to float32, an Expand to the input's own shape. A Cast to an integer type, an Expand
// that broadcasts, and a copy that writes a graph output stay.
TEST(ComposeMovement, NodesThatCopyTheirInputAreDropped) {
  GraphBuilder b;
  for (const char* v : {"x", "a", "c", "e", "y", "out"}) b.value(v, {2, 4});
  b.value("i", {2, 4});
  b.g.values["i"].is_float = false;
  b.g.values["i"].dtype = "int64";
  b.value("wide", {3, 2, 4});
  b.constant("shape", {2}, {});
  b.g.values["shape"].is_float = false;
  b.g.values["shape"].ints = {2, 4};
  b.constant("shape3", {3}, {});
  b.g.values["shape3"].is_float = false;
  b.g.values["shape3"].ints = {3, 2, 4};
  b.node("Identity", {"x"}, "a");
  b.node("Cast", {"a"}, "c").attributes["to"].i = 1;
  b.node("Expand", {"c", "shape"}, "e");
  b.node("Relu", {"e"}, "y");
  b.node("Cast", {"y"}, "i").attributes["to"].i = 7;
  b.node("Expand", {"y", "shape3"}, "wide");
  b.node("Identity", {"y"}, "out");
  b.g.inputs = {"x"};
  b.g.outputs = {"i", "wide", "out"};
  auto composed = compose_movement(b.g);
  ASSERT_TRUE(composed.ok());
  EXPECT_EQ(*composed, 3);
  EXPECT_EQ(ops_of(b.g), (std::vector<std::string>{"Relu", "Cast", "Expand", "Identity"}));
  EXPECT_EQ(b.g.nodes[0].inputs, (std::vector<std::string>{"x"}));
}

// GroupNormalization becomes rows of each group normalized between two Reshapes, then the scale
// and the bias per channel: opset 21's one per channel kept, opset 18's one per group repeated over
// its channels. Channels that do not split into the groups, or a scale of another length, are
// refused naming the node.
TEST(Decompose, GroupNormalizationBecomesRowsNormalizedThenScaledPerChannel) {
  auto decomposed = [](int64_t channels, int64_t scale_count, int64_t groups, Graph& g) {
    GraphBuilder b;
    b.value("x", {1, channels, 2, 3});
    b.value("y", {1, channels, 2, 3});
    std::vector<float> scale, bias;
    for (int64_t k = 0; k < scale_count; ++k) scale.push_back(1.f + static_cast<float>(k)), bias.push_back(-static_cast<float>(k));
    b.constant("scale", {scale_count}, scale);
    b.constant("bias", {scale_count}, bias);
    b.node("GroupNormalization", {"x", "scale", "bias"}, "y").attributes["num_groups"].i = groups;
    b.g.nodes.back().attributes["epsilon"].f = 1e-3f;
    b.g.inputs = {"x"};
    b.g.outputs = {"y"};
    auto count = decompose(b.g);
    g = b.g;
    return count.status();
  };
  for (int64_t scale_count : {4, 2}) {
    Graph g;
    ASSERT_TRUE(decomposed(4, scale_count, 2, g).ok());
    ASSERT_EQ(ops_of(g), (std::vector<std::string>{"Reshape", "LayerNormalization", "Reshape", "Mul", "Add"}));
    EXPECT_EQ(g.find(g.nodes[0].outputs[0])->shape, (std::vector<int64_t>{1, 2, 12}));
    EXPECT_FLOAT_EQ(g.nodes[1].float_attr("epsilon", 0), 1e-3f);
    EXPECT_EQ(g.nodes[4].outputs[0], "y");
    const Value* scale = g.find(g.nodes[3].inputs[1]);
    ASSERT_TRUE(scale && scale->constant);
    EXPECT_EQ(scale->shape, (std::vector<int64_t>{4, 1, 1}));
    EXPECT_EQ(scale->floats, scale_count == 4 ? (std::vector<float>{1, 2, 3, 4}) : (std::vector<float>{1, 1, 2, 2}));
  }
  for (auto [channels, scale_count] : {std::pair<int64_t, int64_t>{3, 3}, {4, 3}}) {
    Graph g;
    Status s = decomposed(channels, scale_count, 2, g);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("y_node"), std::string::npos) << s.message();
  }
}

// A 1-D convolution becomes a 2-D one over a row: its padding a Pad of its own, the kernel 1 x k,
// the stride and dilation on both axes, then the output reshaped back; a 2-D one stays.
TEST(Decompose, AOneDimensionalConvolutionBecomesATwoDimensionalOneOverARow) {
  GraphBuilder b;
  b.value("x", {1, 4, 20});
  b.constant("w", {8, 4, 3}, std::vector<float>(96, 0.5f));
  b.value("y", {1, 8, 10});
  Node& conv = b.node("Conv", {"x", "w"}, "y");
  conv.attributes["kernel_shape"].ints = {3};
  conv.attributes["strides"].ints = {2};
  conv.attributes["pads"].ints = {1, 1};
  b.g.inputs = {"x"};
  b.g.outputs = {"y"};
  auto count = decompose(b.g);
  ASSERT_TRUE(count.ok()) << count.status().to_string();
  ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"Pad", "Reshape", "Conv", "Reshape"}));
  const Node& c = b.g.nodes[2];
  EXPECT_EQ(b.g.find(c.inputs[0])->shape, (std::vector<int64_t>{1, 4, 1, 22}));
  EXPECT_EQ(b.g.find(c.inputs[1])->shape, (std::vector<int64_t>{8, 4, 1, 3}));
  EXPECT_EQ(c.ints_attr("kernel_shape"), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(c.ints_attr("strides"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(c.ints_attr("pads"), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(b.g.find(c.outputs[0])->shape, (std::vector<int64_t>{1, 8, 1, 10}));
  EXPECT_EQ(b.g.nodes[3].outputs[0], "y");
}

// auto_pad SAME_UPPER (tf2onnx's): a stride-2 convolution of an even map pads one more at the end,
// which becomes a Pad of its own before a Conv that pads nothing; a MaxPool's becomes its pads.
TEST(Decompose, SamePaddingIsWrittenOut) {
  GraphBuilder b;
  b.value("x", {1, 2, 8, 8});
  b.constant("w", {4, 2, 3, 3}, std::vector<float>(72, 0.5f));
  b.value("y", {1, 4, 4, 4});
  b.value("z", {1, 4, 2, 2});
  Node& conv = b.node("Conv", {"x", "w"}, "y");
  conv.attributes["kernel_shape"].ints = {3, 3};
  conv.attributes["strides"].ints = {2, 2};
  conv.attributes["auto_pad"].s = "SAME_UPPER";
  Node& pool = b.node("MaxPool", {"y"}, "z");
  pool.attributes["kernel_shape"].ints = {3, 3};
  pool.attributes["strides"].ints = {2, 2};
  pool.attributes["auto_pad"].s = "SAME_UPPER";
  b.g.inputs = {"x"};
  b.g.outputs = {"z"};
  auto count = decompose(b.g);
  ASSERT_TRUE(count.ok()) << count.status().to_string();
  ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"Pad", "Conv", "MaxPool"}));
  EXPECT_EQ(b.g.find(b.g.nodes[0].inputs[1])->ints, (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(b.g.nodes[1].ints_attr("pads"), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(b.g.nodes[1].attributes.count("auto_pad"), 0u);
  EXPECT_EQ(b.g.nodes[2].ints_attr("pads"), (std::vector<int64_t>{0, 0, 1, 1}));
}

// Attention (opset 23) with what the build cannot run is refused naming the node: a KV cache, a
// softcap, a present_key output something reads, heads that do not divide the width.
TEST(Decompose, AttentionWithACacheOrSoftcapIsRefusedByName) {
  auto refused = [](const std::function<void(GraphBuilder&, Node&)>& change) {
    GraphBuilder b;
    for (const char* v : {"q", "k", "v", "y"}) b.value(v, {1, 2, 3, 4});
    b.value("past", {1, 2, 5, 4});
    b.value("present", {1, 2, 8, 4});
    b.node("Attention", {"q", "k", "v"}, "y");
    b.g.inputs = {"q", "k", "v", "past"};
    b.g.outputs = {"y"};
    change(b, b.g.nodes.back());
    return decompose(b.g).status();
  };
  EXPECT_TRUE(refused([](GraphBuilder&, Node&) {}).ok());
  std::vector<Status> refusals = {
      refused([](GraphBuilder&, Node& n) { n.inputs = {"q", "k", "v", "", "past", "past"}; }),
      refused([](GraphBuilder&, Node& n) { n.attributes["softcap"].f = 30.f; }),
      refused([](GraphBuilder& b, Node& n) {
        n.outputs = {"y", "present"};
        b.g.outputs.push_back("present");
      }),
      refused([](GraphBuilder& b, Node& n) {
        for (const char* v : {"q", "k", "v", "y"}) b.value(v, {1, 3, 8});
        n.attributes["q_num_heads"].i = 3;
        n.attributes["kv_num_heads"].i = 3;
      })};
  for (size_t i = 0; i < refusals.size(); ++i) {
    EXPECT_FALSE(refusals[i].ok()) << "case " << i;
    EXPECT_NE(refusals[i].message().find("node 'y_node' (Attention)"), std::string::npos) << refusals[i].message();
  }
}

// An LSTM unrolls into MatMuls and elementwise nodes, and what it cannot be is refused by name:
// another activation, clip, sequence lengths shorter than the sequence, weights computed at run
// time, a sequence too long to unroll.
TEST(Decompose, AnLstmUnrollsOrIsRefusedByName) {
  auto decomposed = [](const std::function<void(GraphBuilder&, Node&)>& change, std::vector<std::string>* ops = nullptr) {
    GraphBuilder b;
    b.value("x", {3, 1, 2});
    b.value("y", {3, 1, 1, 4});
    b.constant("w", {1, 16, 2}, std::vector<float>(32, 0.1f));
    b.constant("r", {1, 16, 4}, std::vector<float>(64, 0.1f));
    b.node("LSTM", {"x", "w", "r"}, "y").attributes["hidden_size"].i = 4;
    b.g.inputs = {"x"};
    b.g.outputs = {"y"};
    change(b, b.g.nodes.back());
    Status s = decompose(b.g).status();
    if (ops) *ops = ops_of(b.g);
    return s;
  };
  std::vector<std::string> ops;
  ASSERT_TRUE(decomposed([](GraphBuilder&, Node&) {}, &ops).ok());
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "LSTM"), 0);
  // The input's product for all three steps at once, the recurrent one from the second step on;
  // the input and output gates every step, the forget gate once there is a cell state to forget.
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "MatMul"), 3);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Sigmoid"), 2 + 3 * 2);
  std::vector<Status> refusals = {
      decomposed([](GraphBuilder&, Node& n) { n.attributes["activations"].strings = {"Sigmoid", "Relu", "Tanh"}; }),
      decomposed([](GraphBuilder&, Node& n) { n.attributes["clip"].f = 3.f; }),
      decomposed([](GraphBuilder& b, Node& n) {
        b.value("lens", {1});
        b.g.values["lens"].constant = true;
        b.g.values["lens"].is_float = false;
        b.g.values["lens"].ints = {2};
        n.inputs = {"x", "w", "r", "", "lens"};
      }),
      decomposed([](GraphBuilder& b, Node& n) {
        b.value("computed", {1, 16, 2});
        n.inputs[1] = "computed";
      }),
      decomposed([](GraphBuilder& b, Node&) { b.value("x", {600, 1, 2}); })};
  for (size_t i = 0; i < refusals.size(); ++i) {
    EXPECT_FALSE(refusals[i].ok()) << "case " << i;
    EXPECT_NE(refusals[i].message().find("node 'y_node' (LSTM)"), std::string::npos) << refusals[i].message();
  }
  EXPECT_NE(refusals[0].message().find("activation 'Relu'"), std::string::npos) << refusals[0].message();
  EXPECT_NE(refusals[4].message().find("600 steps"), std::string::npos) << refusals[4].message();
}

// A dilated convolution whose taps mostly read padding (an atrous rate of 12 over 16x16) becomes a
// convolution per region of the output where the same taps read the input, concatenated: the
// middle 8x8 is the center tap alone. One whose taps mostly read the input stays.
TEST(Decompose, ADilatedConvolutionReadingMostlyPaddingIsSplitByRegion) {
  auto decomposed = [](int64_t rate, std::vector<std::string>& ops, Graph& g) {
    GraphBuilder b;
    b.value("x", {1, 128, 16, 16});
    b.value("y", {1, 128, 16, 16});
    b.constant("w", {128, 128, 3, 3}, std::vector<float>(128 * 128 * 9, 0.5f));
    Node& conv = b.node("Conv", {"x", "w"}, "y");
    conv.attributes["dilations"].ints = {rate, rate};
    conv.attributes["pads"].ints = {rate, rate, rate, rate};
    conv.attributes["kernel_shape"].ints = {3, 3};
    b.g.inputs = {"x"};
    b.g.outputs = {"y"};
    ASSERT_TRUE(decompose(b.g).ok());
    ops = ops_of(b.g);
    g = b.g;
  };
  std::vector<std::string> ops;
  Graph g;
  decomposed(12, ops, g);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Conv"), 9);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Concat"), 4);
  const Node* middle = nullptr;
  for (const Node& n : g.nodes)
    if (n.name == "y_node/region1_1") middle = &n;
  ASSERT_NE(middle, nullptr);
  EXPECT_EQ(middle->attributes.at("kernel_shape").ints, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(g.find(middle->inputs[0])->shape, (std::vector<int64_t>{1, 128, 8, 8}));
  EXPECT_EQ(g.find(middle->inputs[1])->floats.size(), 128u * 128u);
  decomposed(1, ops, g);
  EXPECT_EQ(ops, (std::vector<std::string>{"Conv"}));
}

// Tables computed from constants fold (a rotary embedding's Cos and Sin of its angles, a scale's
// Pow, T5's Log and Floor of position buckets); Max of three inputs stays a node.
TEST(FoldConstants, MathOfConstantsFolds) {
  GraphBuilder b;
  b.constant("a", {3}, {0.f, 1.f, 4.f});
  b.constant("half", {}, {0.5f});
  for (const char* v : {"cos", "sin", "root", "floor", "most"}) b.value(v, {3});
  b.node("Cos", {"a"}, "cos");
  b.node("Sin", {"a"}, "sin");
  b.node("Pow", {"a", "half"}, "root");
  b.node("Floor", {"root"}, "floor");
  b.node("Max", {"a", "root", "floor"}, "most");
  b.g.outputs = {"cos", "sin", "floor", "most"};
  auto folded = fold_constants(b.g);
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(*folded, 4);
  EXPECT_EQ(ops_of(b.g), (std::vector<std::string>{"Max"}));
  EXPECT_FLOAT_EQ(b.g.find("cos")->floats[1], std::cos(1.f));
  EXPECT_FLOAT_EQ(b.g.find("sin")->floats[2], std::sin(4.f));
  EXPECT_EQ(b.g.find("floor")->floats, (std::vector<float>{0, 1, 2}));
}

// Reductions of constants fold (a weight-normalized convolution's norm: axes as an input from
// opset 18, as an attribute before; keepdims; no axes: all of them), and so does a value as
// large as a constant the file holds however large; one that a few values would blow up to
// more than the pass folds stays a node.
TEST(FoldConstants, ReductionsOfConstantsAndWeightsComputedFromThemFold) {
  GraphBuilder b;
  b.constant("v", {2, 1, 2}, {3.f, 4.f, 6.f, 8.f});
  b.constant("axes", {2}, {});
  b.g.values["axes"].is_float = false;
  b.g.values["axes"].ints = {0, 1};
  b.value("norm", {1, 1, 2});
  b.value("mean", {2});
  b.value("most", {1, 1, 1});
  b.node("ReduceL2", {"v", "axes"}, "norm");
  b.node("ReduceMean", {"v"}, "mean").attributes["axes"].ints = {1, 2};
  b.g.nodes.back().attributes["keepdims"].i = 0;
  b.node("ReduceMax", {"v"}, "most");
  size_t big = (size_t{1} << 22) + 16;
  b.constant("wide", {static_cast<int64_t>(big)}, std::vector<float>(big, 2.f));
  b.constant("half", {}, {0.5f});
  b.value("scaled", {static_cast<int64_t>(big)});
  b.node("Mul", {"wide", "half"}, "scaled");
  b.constant("shape", {1}, {});
  b.g.values["shape"].is_float = false;
  b.g.values["shape"].ints = {static_cast<int64_t>(big)};
  b.value("ones", {static_cast<int64_t>(big)});
  b.node("ConstantOfShape", {"shape"}, "ones");
  b.g.outputs = {"norm", "mean", "most", "scaled", "ones"};
  auto folded = fold_constants(b.g);
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(*folded, 4);
  EXPECT_EQ(ops_of(b.g), (std::vector<std::string>{"ConstantOfShape"}));
  EXPECT_EQ(b.g.find("norm")->floats, (std::vector<float>{std::sqrt(45.f), std::sqrt(80.f)}));
  EXPECT_EQ(b.g.find("mean")->floats, (std::vector<float>{3.5f, 7.f}));
  EXPECT_EQ(b.g.find("most")->floats, (std::vector<float>{8.f}));
  EXPECT_EQ(b.g.find("scaled")->floats.size(), big);
  EXPECT_EQ(b.g.find("scaled")->floats.back(), 1.f);
}

// A causal mask written as Trilu of a constant (the TorchScript exporter's LLaMA) folds: upper
// keeps the k-th diagonal and above, lower the k-th and below.
TEST(FoldConstants, TriluOfAConstantFolds) {
  GraphBuilder b;
  b.constant("full", {3, 3}, std::vector<float>(9, 1.f));
  b.constant("k", {}, {});
  b.g.values["k"].is_float = false;
  b.g.values["k"].ints = {1};
  b.value("upper", {3, 3});
  b.value("lower", {3, 3});
  b.node("Trilu", {"full", "k"}, "upper");
  b.node("Trilu", {"full"}, "lower").attributes["upper"].i = 0;
  b.g.outputs = {"upper", "lower"};
  auto folded = fold_constants(b.g);
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(*folded, 2);
  EXPECT_TRUE(b.g.nodes.empty());
  EXPECT_EQ(b.g.find("upper")->floats, (std::vector<float>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(b.g.find("lower")->floats, (std::vector<float>{1, 0, 0, 1, 1, 0, 1, 1, 1}));
}

// ScatterElements of constants folds (BEiT's relative position index, written by select_scatter):
// each update lands where its index along the axis says, a reduction combines, an index out of
// range leaves the node to fail where it runs.
TEST(FoldConstants, ScatterElementsOfConstantsFolds) {
  GraphBuilder b;
  b.constant("data", {2, 3}, std::vector<float>(6, 1.f));
  b.constant("updates", {2, 2}, {5, 6, 7, 8});
  for (const char* name : {"indices", "far"}) {
    b.constant(name, {2, 2}, {});
    b.g.values[name].is_float = false;
  }
  b.g.values["indices"].ints = {2, 0, -1, 1};
  b.g.values["far"].ints = {3, 0, 0, 0};
  for (const char* v : {"replaced", "added", "outside"}) b.value(v, {2, 3});
  b.node("ScatterElements", {"data", "indices", "updates"}, "replaced").attributes["axis"].i = 1;
  Node& add = b.node("ScatterElements", {"data", "indices", "updates"}, "added");
  add.attributes["axis"].i = 1;
  add.attributes["reduction"].s = "add";
  b.node("ScatterElements", {"data", "far", "updates"}, "outside").attributes["axis"].i = 1;
  b.g.outputs = {"replaced", "added", "outside"};
  auto folded = fold_constants(b.g);
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(*folded, 2);
  ASSERT_EQ(b.g.nodes.size(), 1u);
  EXPECT_EQ(b.g.nodes[0].outputs[0], "outside");
  EXPECT_EQ(b.g.find("replaced")->floats, (std::vector<float>{6, 1, 5, 1, 8, 7}));
  EXPECT_EQ(b.g.find("added")->floats, (std::vector<float>{7, 1, 6, 1, 9, 8}));
}

// A residual Add of two computed tensors joins the LayerNorm after it (its scale and bias after the
// two); an Add of a constant (a bias) does not, nor an Add whose sum something else reads too.
TEST(FuseRowInputs, AResidualAddJoinsTheLayerNormAfterIt) {
  GraphBuilder b;
  for (const char* v : {"a", "r", "s", "y", "c", "t", "z"}) b.value(v, {2, 8});
  b.constant("gamma", {8}, std::vector<float>(8, 1.5f));
  b.constant("beta", {8}, std::vector<float>(8, 0.25f));
  b.constant("bias", {8}, std::vector<float>(8, 1.f));
  b.node("Add", {"a", "r"}, "s");
  b.node("LayerNormalization", {"s", "gamma", "beta"}, "y");
  b.node("Add", {"y", "bias"}, "c");
  b.node("LayerNormalization", {"c", "gamma", "beta"}, "t");
  b.node("Add", {"t", "a"}, "u");
  b.value("u", {2, 8});
  b.node("LayerNormalization", {"u", "gamma", "beta"}, "z");
  b.g.inputs = {"a", "r"};
  b.g.outputs = {"z", "u"};
  auto folded = fuse_row_inputs(b.g);
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(*folded, 1);
  ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"SkipLayerNormalization", "Add", "LayerNormalization", "Add",
                                                   "LayerNormalization"}));
  EXPECT_EQ(b.g.nodes[0].inputs, (std::vector<std::string>{"a", "r", "gamma", "beta"}));
  EXPECT_EQ(b.g.nodes[0].outputs, (std::vector<std::string>{"y"}));
  EXPECT_EQ(b.g.nodes[0].sources, (std::vector<std::string>{"y_node", "s_node"}));
}

// Attention's scale (a Div or a Mul by a constant scalar) and its mask (an Add of a tensor that
// broadcasts to the scores) join the Softmax after them; a Div by a tensor does not.
TEST(FuseRowInputs, ScaleAndMaskJoinTheSoftmax) {
  GraphBuilder b;
  for (const char* v : {"q", "d", "m", "p", "e", "f", "g"}) b.value(v, {1, 2, 4, 4});
  b.value("mask", {1, 1, 1, 4});
  b.scalar("eight", 8.f);
  b.node("Div", {"q", "eight"}, "d");
  b.node("Add", {"mask", "d"}, "m");
  b.node("Softmax", {"m"}, "p");
  b.node("Mul", {"eight", "p"}, "e");
  b.node("Softmax", {"e"}, "f");
  b.node("Div", {"f", "q"}, "h");
  b.value("h", {1, 2, 4, 4});
  b.node("Softmax", {"h"}, "g");
  b.g.inputs = {"q", "mask"};
  b.g.outputs = {"g"};
  auto folded = fuse_row_inputs(b.g);
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(*folded, 3);
  ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"Softmax", "Softmax", "Div", "Softmax"}));
  EXPECT_EQ(b.g.nodes[0].inputs, (std::vector<std::string>{"q", "mask"}));
  EXPECT_FLOAT_EQ(b.g.nodes[0].float_attr("scale", 0), 0.125f);
  EXPECT_EQ(b.g.nodes[1].inputs, (std::vector<std::string>{"p"}));
  EXPECT_FLOAT_EQ(b.g.nodes[1].float_attr("scale", 0), 8.f);
  EXPECT_EQ(b.g.nodes[3].inputs, (std::vector<std::string>{"h"}));
  EXPECT_EQ(b.g.nodes[3].attributes.count("scale"), 0u);
}

// A convolution [1, 4, 6, 6] and what follows it.
void conv(GraphBuilder& b) {
  b.value("x", {1, 4, 6, 6});
  b.constant("w", {4, 4, 3, 3}, std::vector<float>(144, 0.1f));
  b.value("c", {1, 4, 6, 6});
  b.node("Conv", {"x", "w"}, "c");
  b.g.inputs = {"x"};
}

TEST(GroupEpilogues, BiasResidualAndActivationJoinTheConvolutionInOrder) {
  GraphBuilder b;
  conv(b);
  b.constant("bias", {1, 4, 1, 1}, {1, 2, 3, 4});
  for (const char* v : {"cb", "r", "y"}) b.value(v, {1, 4, 6, 6});
  b.scalar("lo", 0.f);
  b.scalar("hi", 6.f);
  b.node("Add", {"c", "bias"}, "cb");
  b.node("Add", {"x", "cb"}, "r");  // the residual: the block's input, computed before the Conv
  b.node("Clip", {"r", "lo", "hi"}, "y");
  b.g.outputs = {"y"};
  auto grouped = group_epilogues(b.g);
  ASSERT_TRUE(grouped.ok());
  EXPECT_EQ(*grouped, 3);
  ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"Conv"}));
  const Node& c = b.g.nodes[0];
  EXPECT_EQ(c.outputs[0], "y");
  ASSERT_EQ(c.epilogue.size(), 3u);
  EXPECT_EQ(c.epilogue[0].op, "bias");
  EXPECT_EQ(c.epilogue[0].operand, "bias");
  EXPECT_EQ(c.epilogue[1].op, "add");
  EXPECT_EQ(c.epilogue[1].operand, "x");
  EXPECT_EQ(c.epilogue[2].op, "clip");
  EXPECT_EQ(c.epilogue[2].lo, 0.f);
  EXPECT_EQ(c.epilogue[2].hi, 6.f);
}

// SiLU as exporters write it, x * Sigmoid(x): the convolution's output read by the gate and by
// the product; both join the convolution as one epilogue. A gate something else reads stays.
TEST(GroupEpilogues, SiluWrittenAsAProductJoinsTheConvolution) {
  GraphBuilder b;
  conv(b);
  for (const char* v : {"s", "y"}) b.value(v, {1, 4, 6, 6});
  b.node("Sigmoid", {"c"}, "s");
  b.node("Mul", {"s", "c"}, "y");
  b.g.outputs = {"y"};
  auto grouped = group_epilogues(b.g);
  ASSERT_TRUE(grouped.ok());
  EXPECT_EQ(*grouped, 2);
  ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"Conv"}));
  EXPECT_EQ(b.g.nodes[0].outputs[0], "y");
  ASSERT_EQ(b.g.nodes[0].epilogue.size(), 1u);
  EXPECT_EQ(b.g.nodes[0].epilogue[0].op, "silu");

  GraphBuilder shared;
  conv(shared);
  for (const char* v : {"s", "y", "z"}) shared.value(v, {1, 4, 6, 6});
  shared.node("Sigmoid", {"c"}, "s");
  shared.node("Mul", {"c", "s"}, "y");
  shared.node("Relu", {"s"}, "z");  // the gate has a second reader
  shared.g.outputs = {"y", "z"};
  auto kept = group_epilogues(shared.g);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, 0);
  EXPECT_EQ(shared.g.nodes.size(), 4u);
}

// GPT-2's Conv1D: the rows of [1, 3, 4] flattened for a Gemm, its output reshaped back, then GELU
// (tanh) and the residual add: the Gemm writes the reshaped value, and both join it.
TEST(GroupEpilogues, AGemmsRowsReshapedBackKeepTheirEpilogues) {
  GraphBuilder b;
  b.value("x", {1, 3, 4});
  b.constant("rows", {2}, {});
  b.g.values["rows"].is_float = false;
  b.g.values["rows"].ints = {-1, 4};
  b.constant("back", {3}, {});
  b.g.values["back"].is_float = false;
  b.g.values["back"].ints = {1, 3, 4};
  b.constant("w", {4, 4}, std::vector<float>(16, 0.1f));
  b.constant("bias", {4}, {1, 2, 3, 4});
  b.value("a", {3, 4});
  b.value("g", {3, 4});
  for (const char* v : {"r", "y", "z"}) b.value(v, {1, 3, 4});
  b.node("Reshape", {"x", "rows"}, "a");
  b.node("Gemm", {"a", "w", "bias"}, "g");
  b.node("Reshape", {"g", "back"}, "r");
  b.node("Gelu", {"r"}, "y").attributes["approximate"].s = "tanh";
  b.node("Add", {"y", "x"}, "z");
  b.g.inputs = {"x"};
  b.g.outputs = {"z"};
  auto grouped = group_epilogues(b.g);
  ASSERT_TRUE(grouped.ok());
  EXPECT_EQ(*grouped, 3);
  ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"Reshape", "Gemm"}));
  const Node& gemm = b.g.nodes[1];
  EXPECT_EQ(gemm.outputs[0], "z");
  ASSERT_EQ(gemm.epilogue.size(), 2u);
  EXPECT_EQ(gemm.epilogue[0].op, "gelu_tanh");
  EXPECT_EQ(gemm.epilogue[1].op, "add");
  EXPECT_EQ(gemm.epilogue[1].operand, "x");
}

TEST(GroupEpilogues, AnOutputReadTwiceOrAnAddendComputedLaterStaysApart) {
  GraphBuilder b;
  conv(b);
  for (const char* v : {"r1", "r2", "later", "y"}) b.value(v, {1, 4, 6, 6});
  b.node("Relu", {"c"}, "r1");
  b.node("Relu", {"c"}, "r2");  // c has two readers: neither Relu may take it over
  b.node("Sigmoid", {"r1"}, "later");
  b.g.outputs = {"r2", "later"};
  auto grouped = group_epilogues(b.g);
  ASSERT_TRUE(grouped.ok());
  EXPECT_EQ(*grouped, 0);
  EXPECT_EQ(b.g.nodes.size(), 4u);

  GraphBuilder late;
  conv(late);
  for (const char* v : {"s", "y"}) late.value(v, {1, 4, 6, 6});
  late.node("Sigmoid", {"x"}, "s");
  late.node("Add", {"c", "s"}, "y");  // s is computed after the Conv: it cannot join it
  late.g.outputs = {"y"};
  auto late_grouped = group_epilogues(late.g);
  ASSERT_TRUE(late_grouped.ok());
  EXPECT_EQ(*late_grouped, 0);
  EXPECT_EQ(late.g.nodes.size(), 3u);
}

// U-Net's up-convolution (2x2 at stride 2, no padding: its windows do not overlap) becomes a GEMM
// of each pixel's channels by the weight as [C, K*R*S], its products placed by Reshape and
// Transpose, then the bias; DCGAN's (4x4 at stride 2, padded: windows overlap) stays.
TEST(Decompose, AConvTransposeWhoseWindowsDoNotOverlapBecomesAGemm) {
  for (bool overlapping : {false, true}) {
    GraphBuilder b;
    b.value("x", {1, 4, 3, 3});
    int64_t k = overlapping ? 4 : 2;
    b.constant("w", {4, 2, k, k}, std::vector<float>(static_cast<size_t>(8 * k * k), 0.1f));
    b.constant("bias", {2}, {1, 2});
    b.value("y", {1, 2, 6, 6});
    Node& t = b.node("ConvTranspose", {"x", "w", "bias"}, "y");
    t.attributes["kernel_shape"].ints = {k, k};
    t.attributes["strides"].ints = {2, 2};
    if (overlapping) t.attributes["pads"].ints = {1, 1, 1, 1};
    b.g.inputs = {"x"};
    b.g.outputs = {"y"};
    auto rewritten = decompose(b.g);
    ASSERT_TRUE(rewritten.ok()) << rewritten.status().to_string();
    if (overlapping) {
      EXPECT_EQ(ops_of(b.g), (std::vector<std::string>{"ConvTranspose"}));
      continue;
    }
    EXPECT_EQ(ops_of(b.g), (std::vector<std::string>{"Reshape", "Transpose", "MatMul", "Reshape", "Transpose", "Reshape", "Add"}));
    const Value* w = b.g.find(b.g.nodes[2].inputs[1]);
    ASSERT_TRUE(w && w->constant);
    EXPECT_EQ(w->shape, (std::vector<int64_t>{4, 8}));
    EXPECT_EQ(b.g.nodes.back().outputs[0], "y");
  }
}

// timm's ViT attention: the Q/K/V GEMM's output [1, 5, 3, 2, 4] to [3, 1, 2, 5, 4] by one
// Transpose, q, k and v picked by Gather, k transposed for the scores. Each Gather becomes one
// Transpose of the GEMM's output reading its index (the big Transpose goes); k's transpose stays
// apart (composed, it would gather each vector from rows far apart).
TEST(ComposeMovement, GathersOfATransposeReadItsInputAndTheTransposeGoes) {
  GraphBuilder b;
  b.value("qkv", {1, 5, 3, 2, 4});
  b.value("t", {3, 1, 2, 5, 4});
  b.node("Transpose", {"qkv"}, "t").attributes["perm"].ints = {2, 0, 3, 1, 4};
  for (int i = 0; i < 3; ++i) {
    std::string index = "i" + std::to_string(i), out = std::string(1, "qkv"[i]) + "h";
    b.constant(index, {}, {});
    b.g.values[index].is_float = false;
    b.g.values[index].ints = {i == 2 ? -1 : i};  // v by a negative index
    b.value(out, {1, 2, 5, 4});
    b.node("Gather", {"t", index}, out).attributes["axis"].i = 0;
  }
  b.value("kt", {1, 2, 4, 5});
  b.node("Transpose", {"kh"}, "kt").attributes["perm"].ints = {0, 1, 3, 2};
  b.g.inputs = {"qkv"};
  b.g.outputs = {"qh", "kt", "vh"};
  auto composed = compose_movement(b.g);
  ASSERT_TRUE(composed.ok());
  EXPECT_EQ(*composed, 3);
  ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"Transpose", "Transpose", "Transpose", "Transpose"}));
  for (int i = 0; i < 3; ++i) {
    const Node& n = b.g.nodes[i];
    EXPECT_EQ(n.inputs, (std::vector<std::string>{"qkv"})) << i;
    // Output axis d reads qkv's axis perm[d], numbered without the selected axis 2.
    EXPECT_EQ(n.ints_attr("perm"), (std::vector<int64_t>{0, 2, 1, 3})) << i;
    EXPECT_EQ(n.int_attr("select_axis", -1), 2) << i;
    EXPECT_EQ(n.int_attr("select_index", -1), i) << i;
  }
  EXPECT_EQ(b.g.nodes[3].inputs, (std::vector<std::string>{"kh"}));
}

// Two Transposes compose into one where the composed copy still reads the last axis innermost; a
// Transpose another node also reads stays for it; a perm that is not a permutation is left alone.
TEST(ComposeMovement, TransposesComposeWhereTheLastAxisStaysInnermost) {
  GraphBuilder b;
  b.value("x", {2, 3, 4, 5});
  b.value("a", {3, 4, 2, 5});
  b.value("y", {4, 3, 2, 5});
  b.node("Transpose", {"x"}, "a").attributes["perm"].ints = {1, 2, 0, 3};
  b.node("Transpose", {"a"}, "y").attributes["perm"].ints = {1, 0, 2, 3};
  b.value("r", {3, 4, 2, 5});
  b.node("Relu", {"a"}, "r");
  b.value("bad", {3, 3, 2, 5});
  b.node("Transpose", {"a"}, "bad").attributes["perm"].ints = {0, 0, 2, 3};
  b.g.inputs = {"x"};
  b.g.outputs = {"y", "r", "bad"};
  auto composed = compose_movement(b.g);
  ASSERT_TRUE(composed.ok());
  EXPECT_EQ(*composed, 1);
  ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"Transpose", "Transpose", "Relu", "Transpose"}));
  EXPECT_EQ(b.g.nodes[1].inputs, (std::vector<std::string>{"x"}));
  EXPECT_EQ(b.g.nodes[1].ints_attr("perm"), (std::vector<int64_t>{2, 1, 0, 3}));
  EXPECT_EQ(b.g.nodes[3].inputs, (std::vector<std::string>{"a"}));
}

TEST(RunPasses, FoldsThenFusesThenGroups) {
  // A transposed constant weight feeding a MatMul, then a bias Add and a Relu: the weight folds,
  // and the MatMul takes the Add and the Relu as its epilogue.
  GraphBuilder b;
  b.value("x", {2, 3});
  b.constant("w", {4, 3}, std::vector<float>(12, 0.5f));
  b.value("wt", {3, 4});
  b.node("Transpose", {"w"}, "wt").attributes["perm"].ints = {1, 0};
  b.constant("bias", {4}, {1, 2, 3, 4});
  for (const char* v : {"m", "mb", "y"}) b.value(v, {2, 4});
  b.node("MatMul", {"x", "wt"}, "m");
  b.node("Add", {"m", "bias"}, "mb");
  b.node("Relu", {"mb"}, "y");
  b.g.inputs = {"x"};
  b.g.outputs = {"y"};
  ASSERT_TRUE(run_passes(b.g).ok());
  ASSERT_EQ(ops_of(b.g), (std::vector<std::string>{"MatMul"}));
  EXPECT_TRUE(b.g.find("wt")->constant);
  ASSERT_EQ(b.g.nodes[0].epilogue.size(), 2u);
  EXPECT_EQ(b.g.nodes[0].epilogue[0].op, "bias");
  EXPECT_EQ(b.g.nodes[0].epilogue[1].op, "relu");
}

}  // namespace
// Channel counts no block divides, and any of 160 or more, are padded to whole vectors of 16;
// counts in blocks of their own below 160, 8 or fewer, and multiples of 8 below 64 stay.
TEST(PadChannels, CountsNoBlockDividesArePaddedToWholeVectors) {
  for (auto [channels, padded] : std::vector<std::pair<int64_t, int64_t>>{
           {58, 64}, {116, 128}, {232, 240}, {104, 112}, {12, 16}, {184, 192}, {1000, 1008}, {200, 208},
           {3, 3}, {8, 8}, {24, 24}, {56, 56}, {72, 72}, {88, 88}, {120, 120}, {64, 64}, {576, 576}})
    EXPECT_EQ(padded_channels(channels), padded) << channels;
}

// A convolution whose weight does not fit its input (a hostile file: 80 input channels of a
// 58-channel value, or fewer floats than its shape) is left as it is, for the build to refuse by
// name; one that fits is padded, its weight and output to 64 channels.
TEST(PadChannels, WeightsThatDoNotFitTheirInputAreLeftForTheBuildToRefuse) {
  GraphBuilder b;
  b.value("x", {1, 58, 4, 4});
  b.constant("w_wide", {58, 80, 1, 1}, std::vector<float>(58 * 80, 0.5f));
  b.constant("w_short", {58, 58, 1, 1}, std::vector<float>(10, 0.5f));
  b.constant("w", {58, 58, 1, 1}, std::vector<float>(58 * 58, 0.5f));
  b.value("a", {1, 58, 4, 4});
  b.value("s", {1, 58, 4, 4});
  b.value("y", {1, 58, 4, 4});
  b.node("Conv", {"x", "w_wide"}, "a");
  b.node("Conv", {"x", "w_short"}, "s");
  b.node("Conv", {"x", "w"}, "y");
  b.g.inputs = {"x"};
  b.g.outputs = {"a", "s", "y"};
  auto padded = pad_channels(b.g);
  ASSERT_TRUE(padded.ok()) << padded.status().to_string();
  EXPECT_EQ(*padded, 1);
  EXPECT_EQ(ops_of(b.g), (std::vector<std::string>{"Conv", "Conv", "Pad", "Conv", "Slice"}));
  EXPECT_EQ(b.g.nodes[0].inputs[1], "w_wide");
  EXPECT_EQ(b.g.find(b.g.nodes[3].inputs[1])->shape, (std::vector<int64_t>{64, 64, 1, 1}));
  EXPECT_EQ(b.g.find("y/padded")->shape, (std::vector<int64_t>{1, 64, 4, 4}));
}

// A constant of one value per channel ([C, 1, 1]) scales a padded value padded with zeros; a [C]
// broadcasts along the columns (here 58 wide, as many as the channels), not the channels: the Mul
// that reads it reads the model's channels, sliced out.
TEST(PadChannels, OnlyConstantsPerChannelAsBroadcastingReadsThemArePadded) {
  GraphBuilder b;
  b.value("x", {1, 24, 2, 58});
  b.constant("w", {58, 24, 1, 1}, std::vector<float>(58 * 24, 0.5f));
  b.constant("per_channel", {58, 1, 1}, std::vector<float>(58, 2.f));
  b.constant("per_column", {58}, std::vector<float>(58, 3.f));
  for (const char* v : {"c", "s", "y"}) b.value(v, {1, 58, 2, 58});
  b.node("Conv", {"x", "w"}, "c");
  b.node("Mul", {"c", "per_channel"}, "s");
  b.node("Mul", {"s", "per_column"}, "y");
  b.g.inputs = {"x"};
  b.g.outputs = {"y"};
  ASSERT_TRUE(pad_channels(b.g).ok());
  EXPECT_EQ(ops_of(b.g), (std::vector<std::string>{"Conv", "Mul", "Slice", "Mul"}));
  EXPECT_EQ(b.g.find(b.g.nodes[1].inputs[1])->shape, (std::vector<int64_t>{64, 1, 1}));
  EXPECT_EQ(b.g.nodes[3].inputs, (std::vector<std::string>{"s", "per_column"}));
}

}  // namespace tunefarm::model
