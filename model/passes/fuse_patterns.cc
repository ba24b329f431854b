#include "model/passes/fuse_patterns.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace tunefarm::model {
namespace {

// The input of a binary node that is not `from`.
const std::string& other_input(const Node& n, const std::string& from) { return n.inputs[0] == from ? n.inputs[1] : n.inputs[0]; }

// The node that reads `value` if it is the only reader and has operator `op`; else -1.
int next(const Graph& g, const std::string& value, const char* op) {
  int r = g.only_reader(value);
  return r >= 0 && g.nodes[r].op == op && g.nodes[r].outputs.size() == 1 ? r : -1;
}

// A GELU ending at the node `end` (the final Mul by 0.5, or the Mul by x when the 0.5 came first).
bool match_gelu(const Graph& g, int erf, std::vector<int>& chain, std::string& input, std::string& output) {
  const Node& e = g.nodes[erf];
  int div = g.producer(e.inputs[0]);
  float k;
  if (div < 0 || g.nodes[div].op != "Div" || g.readers(g.nodes[div].outputs[0]) != 1 ||
      !g.scalar(g.nodes[div].inputs[1], k) || std::abs(k - std::sqrt(2.f)) > 1e-3f)
    return false;
  input = g.nodes[div].inputs[0];
  int add = next(g, e.outputs[0], "Add");
  if (add < 0 || !g.scalar(other_input(g.nodes[add], e.outputs[0]), k) || k != 1.f) return false;
  int mul = next(g, g.nodes[add].outputs[0], "Mul");
  if (mul < 0 || other_input(g.nodes[mul], g.nodes[add].outputs[0]) != input) return false;
  int half = next(g, g.nodes[mul].outputs[0], "Mul");
  if (half < 0 || !g.scalar(other_input(g.nodes[half], g.nodes[mul].outputs[0]), k) || k != 0.5f) return false;
  chain = {div, erf, add, mul, half};
  output = g.nodes[half].outputs[0];
  return true;
}

// Mish as exporters before opset 18 write it: Softplus(x) -> Tanh -> Mul(x).
bool match_mish(const Graph& g, int softplus, std::vector<int>& chain, std::string& input, std::string& output) {
  input = g.nodes[softplus].inputs.at(0);
  int tanh = next(g, g.nodes[softplus].outputs[0], "Tanh");
  if (tanh < 0) return false;
  int mul = next(g, g.nodes[tanh].outputs[0], "Mul");
  if (mul < 0 || other_input(g.nodes[mul], g.nodes[tanh].outputs[0]) != input) return false;
  chain = {softplus, tanh, mul};
  output = g.nodes[mul].outputs[0];
  return true;
}

bool match_layer_norm(const Graph& g, int mean, std::vector<int>& chain, std::string& input, std::string& output,
                      std::vector<std::string>& affine, float& eps) {
  const Node& m = g.nodes[mean];
  input = m.inputs[0];
  // x - mean, read by Pow and by Div.
  int sub = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op == "Sub" && g.nodes[i].inputs.size() == 2 && g.nodes[i].inputs[0] == input &&
        g.nodes[i].inputs[1] == m.outputs[0])
      sub = static_cast<int>(i);
  if (sub < 0 || g.readers(m.outputs[0]) != 1) return false;
  const std::string& d = g.nodes[sub].outputs[0];
  if (g.readers(d) != 2) return false;
  int pow = -1, div = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op == "Pow" && n.inputs[0] == d) pow = static_cast<int>(i);
    if (n.op == "Div" && n.inputs[0] == d) div = static_cast<int>(i);
  }
  float k;
  if (pow < 0 || div < 0 || !g.scalar(g.nodes[pow].inputs[1], k) || k != 2.f) return false;
  int var = next(g, g.nodes[pow].outputs[0], "ReduceMean");
  if (var < 0) return false;
  int add = next(g, g.nodes[var].outputs[0], "Add");
  if (add < 0 || !g.scalar(other_input(g.nodes[add], g.nodes[var].outputs[0]), eps)) return false;
  int sqrt = next(g, g.nodes[add].outputs[0], "Sqrt");
  if (sqrt < 0 || g.nodes[div].inputs[1] != g.nodes[sqrt].outputs[0] || g.readers(g.nodes[sqrt].outputs[0]) != 1)
    return false;
  chain = {mean, sub, pow, var, add, sqrt, div};
  output = g.nodes[div].outputs[0];
  // The affine part, when there is one: Mul(gamma) then Add(beta), both constants.
  int scale = next(g, output, "Mul");
  if (scale >= 0) {
    const std::string& gamma = other_input(g.nodes[scale], output);
    int shift = next(g, g.nodes[scale].outputs[0], "Add");
    const Value* gv = g.find(gamma);
    if (shift >= 0 && gv && gv->constant) {
      const std::string& beta = other_input(g.nodes[shift], g.nodes[scale].outputs[0]);
      const Value* bv = g.find(beta);
      if (bv && bv->constant) {
        chain.push_back(scale);
        chain.push_back(shift);
        affine = {gamma, beta};
        output = g.nodes[shift].outputs[0];
      }
    }
  }
  return true;
}

}  // namespace

StatusOr<int> fuse_patterns(Graph& graph) {
  int fused = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < graph.nodes.size() && !changed; ++i) {
      std::vector<int> chain;
      std::string input, output;
      Node replacement;
      if (graph.nodes[i].op == "Erf" && match_gelu(graph, static_cast<int>(i), chain, input, output)) {
        replacement.op = "Gelu";
        replacement.inputs = {input};
      } else if (graph.nodes[i].op == "Softplus" && match_mish(graph, static_cast<int>(i), chain, input, output)) {
        replacement.op = "Mish";
        replacement.inputs = {input};
      } else if (graph.nodes[i].op == "ReduceMean") {
        std::vector<std::string> affine;
        float eps = 0;
        if (!match_layer_norm(graph, static_cast<int>(i), chain, input, output, affine, eps)) continue;
        replacement.op = "LayerNormalization";
        replacement.inputs = {input};
        replacement.inputs.insert(replacement.inputs.end(), affine.begin(), affine.end());
        replacement.attributes["epsilon"].f = eps;
      } else {
        continue;
      }
      replacement.outputs = {output};
      for (int c : chain) replacement.sources.push_back(graph.nodes[c].name);
      replacement.name = graph.nodes[chain.front()].name;
      // The fused node takes the place of the chain's last node: its inputs all exist by then.
      int last = *std::max_element(chain.begin(), chain.end());
      graph.nodes[last] = std::move(replacement);
      std::set<int> drop(chain.begin(), chain.end());
      drop.erase(last);
      std::vector<Node> kept;
      for (size_t k = 0; k < graph.nodes.size(); ++k)
        if (!drop.count(static_cast<int>(k))) kept.push_back(std::move(graph.nodes[k]));
      graph.nodes = std::move(kept);
      ++fused;
      changed = true;
    }
  }
  return fused;
}

}  // namespace tunefarm::model
