#include "model/passes/fuse_row_inputs.h"

#include <algorithm>

namespace tunefarm::model {
namespace {

// The node writing `value` when it has operator `op`, two inputs and one output, and `value` is
// read by one node only (the one that folds it in); else -1.
int folded_producer(const Graph& g, const std::string& value, const char* op) {
  int p = g.producer(value);
  if (p < 0 || g.readers(value) != 1) return -1;
  const Node& n = g.nodes[p];
  return n.op == op && n.inputs.size() == 2 && n.outputs.size() == 1 ? p : -1;
}

const Value* value(const Graph& g, const std::string& name) { return name.empty() ? nullptr : g.find(name); }

bool is_tensor(const Graph& g, const std::string& name) {
  const Value* v = value(g, name);
  return v && !v->constant;
}

// True when `operand` broadcasts to `shape` (NumPy's rule, aligned on the right) without growing it.
bool broadcasts_to(const Graph& g, const std::string& operand, const std::vector<int64_t>& shape) {
  const Value* v = value(g, operand);
  if (!v || !v->is_float || v->shape.size() > shape.size()) return false;
  for (size_t d = 0; d < v->shape.size(); ++d) {
    int64_t a = v->shape[v->shape.size() - 1 - d], b = shape[shape.size() - 1 - d];
    if (a != b && a != 1) return false;
  }
  return true;
}

// input + skip -> LayerNormalization: the Add's index, or -1.
int residual_add(const Graph& g, const Node& norm) {
  if (norm.op != "LayerNormalization" || norm.outputs.size() != 1 || norm.inputs.empty()) return -1;
  int add = folded_producer(g, norm.inputs[0], "Add");
  if (add < 0) return -1;
  const Node& a = g.nodes[add];
  const Value* out = value(g, a.outputs[0]);
  if (!out || !is_tensor(g, a.inputs[0]) || !is_tensor(g, a.inputs[1])) return -1;
  return broadcasts_to(g, a.inputs[0], out->shape) && broadcasts_to(g, a.inputs[1], out->shape) ? add : -1;
}

}  // namespace

StatusOr<int> fuse_row_inputs(Graph& graph) {
  int folded = 0;
  std::vector<bool> drop(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    Node& node = graph.nodes[i];
    if (int add = residual_add(graph, node); add >= 0) {
      const Node& a = graph.nodes[add];
      std::vector<std::string> inputs = {a.inputs[0], a.inputs[1]};
      for (size_t k = 1; k < node.inputs.size(); ++k) inputs.push_back(node.inputs[k]);
      // An omitted scale before a bias cannot be told from an omitted bias once the two move up.
      if (std::find(inputs.begin(), inputs.end(), std::string()) != inputs.end()) continue;
      node.op = "SkipLayerNormalization";
      node.inputs = std::move(inputs);
      absorb(node, a);
      drop[add] = true;
      ++folded;
      continue;
    }
    if (node.op != "Softmax" || node.inputs.size() != 1 || node.attributes.count("scale")) continue;
    std::vector<int> chain;
    std::string x = node.inputs[0], mask;
    if (int add = folded_producer(graph, x, "Add"); add >= 0) {
      // The scores are the operand shaped like the sum; the mask (a row per sentence) broadcasts.
      const Node& a = graph.nodes[add];
      const Value* out = value(graph, a.outputs[0]);
      for (int m : {1, 0}) {
        const Value* scores = value(graph, a.inputs[1 - m]);
        if (mask.empty() && out && scores && scores->shape == out->shape && broadcasts_to(graph, a.inputs[m], out->shape)) {
          mask = a.inputs[m];
          x = a.inputs[1 - m];
          chain.push_back(add);
        }
      }
    }
    float scale = 1, k;
    for (const char* op : {"Div", "Mul"}) {
      int s = folded_producer(graph, x, op);
      if (s < 0) continue;
      const Node& n = graph.nodes[s];
      bool by_first = op[0] == 'M' && graph.scalar(n.inputs[0], k);
      if (!by_first && !graph.scalar(n.inputs[1], k)) continue;
      if (op[0] == 'D' && k == 0) continue;
      scale = op[0] == 'D' ? 1 / k : k;
      x = by_first ? n.inputs[1] : n.inputs[0];
      chain.push_back(s);
      break;
    }
    if (chain.empty()) continue;
    node.inputs = {x};
    if (!mask.empty()) node.inputs.push_back(mask);
    node.attributes["scale"].f = scale;
    for (int c : chain) {
      absorb(node, graph.nodes[c]);
      drop[c] = true;
      ++folded;
    }
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(graph.nodes[i]));
  graph.nodes = std::move(kept);
  return folded;
}

}  // namespace tunefarm::model
