#include "model/passes/group_epilogues.h"

#include <algorithm>
#include <cmath>

#include "model/operators.h"

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

// x * gate(x) as exporters write SiLU (gate Sigmoid) and HardSwish before opset 14 (gate
// HardSigmoid with alpha 1/6, beta 1/2): `value` read by the gate and by a Mul of it and the
// gate's output, which nothing else reads. The epilogue it becomes ("silu" or "hardswish") and the
// indices of the gate and the Mul, or an empty op.
struct GatedProduct {
  std::string op;
  int gate = -1, mul = -1;
};

GatedProduct gated_product(const Graph& graph, const std::string& value) {
  GatedProduct g;
  if (graph.readers(value) != 2) return g;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    if (n.inputs.size() != 1 || n.inputs[0] != value || n.outputs.size() != 1) continue;
    if (n.op == "Sigmoid") {
      g.op = "silu";
    } else if (n.op == "HardSigmoid" && std::abs(n.float_attr("alpha", 0.2f) - 1.f / 6) < 1e-6f &&
               n.float_attr("beta", 0.5f) == 0.5f) {
      g.op = "hardswish";
    } else {
      continue;
    }
    g.gate = static_cast<int>(i);
  }
  if (g.gate < 0) return {};
  const std::string& gate_out = graph.nodes[g.gate].outputs[0];
  g.mul = graph.only_reader(gate_out);
  if (g.mul < 0) return {};
  const Node& m = graph.nodes[g.mul];
  bool product = m.op == "Mul" && m.inputs.size() == 2 && m.outputs.size() == 1 &&
                 ((m.inputs[0] == value && m.inputs[1] == gate_out) || (m.inputs[1] == value && m.inputs[0] == gate_out));
  return product ? g : GatedProduct{};
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
      if (!out) break;
      if (GatedProduct g = gated_product(graph, node.outputs[0]); !g.op.empty()) {
        // The gate and the product both go: the Mul's output is the operator's.
        if (node.sources.empty()) node.sources.push_back(node.name);
        node.sources.push_back(graph.nodes[g.gate].name);
        node.sources.push_back(graph.nodes[g.mul].name);
        node.epilogue.push_back(Epilogue{g.op, "", 0, 0});
        node.outputs[0] = graph.nodes[g.mul].outputs[0];
        graph.nodes.erase(graph.nodes.begin() + std::max(g.gate, g.mul));
        graph.nodes.erase(graph.nodes.begin() + std::min(g.gate, g.mul));
        grouped += 2;
        continue;
      }
      int r = graph.only_reader(node.outputs[0]);
      if (r < 0) break;
      const Node& next = graph.nodes[r];
      if (next.outputs.size() != 1) break;
      // A GEMM's rows reshaped (GPT-2's Conv1D: a Gemm of [B*T, K] rows, reshaped back to
      // [B, T, N]) are the same rows in the same order: the operator writes the reshaped value,
      // and what follows folds as it would after a MatMul of [B, T, K].
      if (node.op != "Conv" && is_view(next.op) && next.inputs[0] == node.outputs[0]) {
        const Value* to = graph.find(next.outputs[0]);
        if (!to || to->shape.empty() || out->shape.empty() || to->shape.back() != out->shape.back() ||
            to->elements() != out->elements())
          break;
        if (node.sources.empty()) node.sources.push_back(node.name);
        node.sources.push_back(next.name);
        node.outputs[0] = next.outputs[0];
        graph.nodes.erase(graph.nodes.begin() + r);
        ++grouped;
        continue;
      }
      Epilogue e;
      if (next.op == "Relu") {
        e.op = "relu";
      } else if (next.op == "HardSwish") {
        e.op = "hardswish";
      } else if (next.op == "Gelu" && next.inputs.size() == 1 &&
                 (!next.attributes.count("approximate") || next.attributes.at("approximate").s == "none")) {
        e.op = "gelu";
      } else if (next.op == "Gelu" && next.inputs.size() == 1 && next.attributes.count("approximate") &&
                 next.attributes.at("approximate").s == "tanh") {
        e.op = "gelu_tanh";
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
