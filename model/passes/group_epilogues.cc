#include "model/passes/group_epilogues.h"

#include <algorithm>

namespace tunefarm::model {
namespace {

// The number of output channels (Conv) or columns (Gemm, MatMul) of a tunable node's output.
int64_t output_channels(const Node& node, const Value& out) {
  if (out.shape.empty()) return -1;
  return node.op == "Conv" ? (out.shape.size() > 1 ? out.shape[1] : -1) : out.shape.back();
}

// A constant that adds one value per output channel: [C], or [1, C, 1, 1] for a convolution.
bool is_channel_bias(const Graph& graph, const Node& node, const Value& out, const std::string& name) {
  const Value* v = graph.find(name);
  if (!v || !v->constant || !v->is_float) return false;
  int64_t channels = output_channels(node, out);
  if (v->elements() != channels) return false;
  if (node.op == "Conv") return v->shape.size() == 1 || (v->shape.size() == out.shape.size() && v->shape[1] == channels);
  return v->shape.size() == 1 || v->shape.back() == channels;
}

}  // namespace

// The constant bounds of a Clip (inputs at opset 11 and later, attributes before).
bool clip_bounds(const Graph& graph, const Node& clip, float& lo, float& hi) {
  lo = clip.float_attr("min", -3.4e38f);
  hi = clip.float_attr("max", 3.4e38f);
  for (size_t k = 1; k < clip.inputs.size() && k < 3; ++k) {
    if (clip.inputs[k].empty()) continue;
    const Value* v = graph.find(clip.inputs[k]);
    if (!v || !v->constant || !v->is_float || v->floats.size() != 1) return false;
    (k == 1 ? lo : hi) = v->floats[0];
  }
  return true;
}

bool is_tunable(const std::string& op) { return op == "Conv" || op == "Gemm" || op == "MatMul"; }

StatusOr<int> group_epilogues(Graph& graph) {
  int grouped = 0;
  // Where each value is produced: a residual operand must exist before the operator it joins.
  auto produced_at = [&](const std::string& name) {
    for (size_t i = 0; i < graph.nodes.size(); ++i)
      if (std::count(graph.nodes[i].outputs.begin(), graph.nodes[i].outputs.end(), name)) return static_cast<int>(i);
    return -1;
  };
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!is_tunable(graph.nodes[i].op)) continue;
    for (;;) {
      Node& node = graph.nodes[i];
      if (node.outputs.size() != 1) break;
      const Value* out = graph.find(node.outputs[0]);
      int r = graph.only_reader(node.outputs[0]);
      if (!out || r < 0) break;
      const Node& next = graph.nodes[r];
      if (next.outputs.size() != 1) break;
      Epilogue e;
      if (next.op == "Relu") {
        e.op = "relu";
      } else if (next.op == "Clip") {
        if (!clip_bounds(graph, next, e.lo, e.hi)) break;
        e.op = "clip";
      } else if (next.op == "Add" && next.inputs.size() == 2) {
        const std::string& other = next.inputs[0] == node.outputs[0] ? next.inputs[1] : next.inputs[0];
        const Value* o = graph.find(other);
        const Value* sum = graph.find(next.outputs[0]);
        bool has_bias = std::any_of(node.epilogue.begin(), node.epilogue.end(), [](const Epilogue& x) { return x.op == "bias"; });
        if (node.epilogue.empty() && !has_bias && is_channel_bias(graph, node, *out, other)) {
          e.op = "bias";
        } else if (o && !o->constant && sum && o->shape == out->shape && sum->shape == out->shape &&
                   produced_at(other) < static_cast<int>(i)) {
          e.op = "add";
        } else {
          break;
        }
        e.operand = other;
      } else {
        break;
      }
      if (node.sources.empty()) node.sources.push_back(node.name);
      node.sources.push_back(next.name);
      node.epilogue.push_back(e);
      node.outputs[0] = next.outputs[0];
      graph.nodes.erase(graph.nodes.begin() + r);
      ++grouped;
    }
  }
  return grouped;
}

}  // namespace tunefarm::model
