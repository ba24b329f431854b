#include "model/passes/fold_batch_norm.h"

#include <cmath>

#include <fmt/format.h>

namespace tunefarm::model {

namespace {

// A BatchNormalization no convolution takes in (DenseNet's and pre-activation ResNets' BN before
// ReLU and the convolution), with constant parameters, as the per-channel scale and shift it is:
// Mul by gamma / sqrt(var + eps), Add of beta - mean * that, each constant [C, 1, ...] (a built
// model runs them in the channel blocks of the tensor they read). None where it is not such a node.
std::vector<Node> as_scale_and_shift(Graph& graph, const Node& bn) {
  if (bn.op != "BatchNormalization" || bn.inputs.size() < 5 || bn.outputs.size() != 1 || bn.int_attr("training_mode", 0) != 0)
    return {};
  const Value* x = graph.find(bn.inputs[0]);
  if (!x || x->shape.size() < 2) return {};
  int64_t channels = x->shape[1];
  const Value* params[4];
  for (int p = 0; p < 4; ++p) {
    params[p] = graph.find(bn.inputs[p + 1]);
    if (!params[p] || !params[p]->constant || !params[p]->is_float || static_cast<int64_t>(params[p]->floats.size()) != channels)
      return {};
  }
  float eps = bn.float_attr("epsilon", 1e-5f);
  std::vector<int64_t> per_channel(x->shape.size() - 1, 1);
  per_channel[0] = channels;
  Value scale, shift, scaled;
  scale.name = bn.name + "/scale";
  shift.name = bn.name + "/shift";
  for (Value* v : {&scale, &shift}) {
    v->constant = true;
    v->shape = per_channel;
    v->floats.resize(static_cast<size_t>(channels));
  }
  for (int64_t k = 0; k < channels; ++k) {
    scale.floats[k] = params[0]->floats[k] / std::sqrt(params[3]->floats[k] + eps);
    shift.floats[k] = params[1]->floats[k] - params[2]->floats[k] * scale.floats[k];
  }
  scaled.name = bn.name + "/scaled";
  scaled.shape = x->shape;
  Node mul, add;
  mul.name = bn.name;
  mul.op = "Mul";
  mul.inputs = {bn.inputs[0], scale.name};
  mul.outputs = {scaled.name};
  add.name = bn.name + "/shift";
  add.op = "Add";
  add.inputs = {scaled.name, shift.name};
  add.outputs = bn.outputs;
  mul.sources = add.sources = {bn.name};
  for (Value* v : {&scale, &shift, &scaled}) graph.values[v->name] = std::move(*v);
  return {mul, add};
}

}  // namespace

StatusOr<int> fold_batch_norm(Graph& graph) {
  int folded = 0;
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    Node& bn = graph.nodes[i];
    if (bn.op != "BatchNormalization" || bn.inputs.size() < 5 || bn.outputs.size() != 1) continue;
    // The producing Conv, when this BatchNormalization is its only reader.
    int conv_index = -1;
    for (size_t j = 0; j < i; ++j)
      if (!removed[j] && graph.nodes[j].op == "Conv" && graph.nodes[j].outputs.size() == 1 &&
          graph.nodes[j].outputs[0] == bn.inputs[0])
        conv_index = static_cast<int>(j);
    if (conv_index < 0 || graph.readers(bn.inputs[0]) != 1) continue;
    Node& conv = graph.nodes[conv_index];
    Value* weight = graph.find(conv.inputs.size() > 1 ? conv.inputs[1] : "");
    const Value* params[4];
    // 1-D, 2-D and 3-D convolutions: one weight per output channel first.
    bool constant = weight && weight->constant && weight->shape.size() >= 3;
    for (int p = 0; p < 4; ++p) {
      params[p] = graph.find(bn.inputs[p + 1]);
      constant = constant && params[p] && params[p]->constant && params[p]->is_float;
    }
    if (!constant) continue;
    int64_t channels = weight->shape[0];
    for (const Value* p : params)
      if (static_cast<int64_t>(p->floats.size()) != channels)
        return invalid_argument(fmt::format("node '{}': BatchNormalization has {} values per parameter, its Conv '{}' "
                                            "{} output channels",
                                            bn.name, p->floats.size(), conv.name, channels));
    float eps = bn.float_attr("epsilon", 1e-5f);
    // The folded weights and bias are new values: the originals may be shared with other nodes.
    Value w = *weight;
    w.name = conv.name + "/folded_weight";
    Value b;
    b.name = conv.name + "/folded_bias";
    b.constant = true;
    b.shape = {channels};
    b.floats.assign(channels, 0.f);
    const Value* old_bias = conv.inputs.size() > 2 && !conv.inputs[2].empty() ? graph.find(conv.inputs[2]) : nullptr;
    int64_t per_channel = w.elements() / channels;
    for (int64_t k = 0; k < channels; ++k) {
      float scale = params[0]->floats[k] / std::sqrt(params[3]->floats[k] + eps);
      for (int64_t e = 0; e < per_channel; ++e) w.floats[k * per_channel + e] *= scale;
      float bias = old_bias && old_bias->constant ? old_bias->floats[k] : 0.f;
      b.floats[k] = (bias - params[2]->floats[k]) * scale + params[1]->floats[k];
    }
    conv.inputs.resize(3);
    conv.inputs[1] = w.name;
    conv.inputs[2] = b.name;
    graph.values[w.name] = std::move(w);
    graph.values[b.name] = std::move(b);
    conv.outputs[0] = bn.outputs[0];
    if (conv.sources.empty()) conv.sources.push_back(conv.name);
    conv.sources.push_back(bn.name);
    removed[i] = true;
    ++folded;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (removed[i]) continue;
    if (std::vector<Node> affine = as_scale_and_shift(graph, graph.nodes[i]); !affine.empty()) {
      for (Node& n : affine) kept.push_back(std::move(n));
      ++folded;
      continue;
    }
    kept.push_back(std::move(graph.nodes[i]));
  }
  graph.nodes = std::move(kept);
  return folded;
}

}  // namespace tunefarm::model
