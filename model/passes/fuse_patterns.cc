#include "model/passes/fuse_patterns.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include "compiler/ops/activations.h"

namespace tunefarm::model {
namespace {

// The input of a binary node that is not `from`.
const std::string& other_input(const Node& n, const std::string& from) { return n.inputs[0] == from ? n.inputs[1] : n.inputs[0]; }

// The node that reads `value` if it is the only reader and has operator `op`; else -1.
int next(const Graph& g, const std::string& value, const char* op) {
  int r = g.only_reader(value);
  return r >= 0 && g.nodes[r].op == op && g.nodes[r].outputs.size() == 1 ? r : -1;
}

// GELU as exporters write it out of elementwise nodes: erf's form (BERT's; PyTorch's exporters
// for nn.GELU, Div by √2 or Mul by 1/√2, the 0.5 first or last) and the tanh approximation
// (GPT-2's gelu_new, Pow or x*x*x, the constants rounded as each writes them). Rather than one
// pattern per way of writing it, the function the nodes compute is evaluated: a region of
// elementwise nodes computing a value from one tensor x and scalar constants is GELU when it agrees
// with it at points across its range.
constexpr int kMaxRegionNodes = 16;
// The nodes after x's producer a region is looked for among: exporters write a GELU's nodes
// together, and a search to the graph's end from every Tanh made an unrolled LSTM's build (36
// layers, 4,600 Tanh nodes among 40,000) take minutes.
constexpr size_t kMaxRegionSpan = 64;
const double kSamples[] = {-6.0, -3.1, -1.7, -0.9, -0.3, -0.02, 0.0, 0.05, 0.4, 1.1, 2.3, 4.2};
constexpr size_t kSampleCount = sizeof(kSamples) / sizeof(kSamples[0]);
using Samples = std::array<double, kSampleCount>;

// `op` applied to `a` (and `b` for a binary one) at every sample; false for an operator a
// region does not take.
bool evaluate(const std::string& op, const Samples& a, const Samples* b, Samples& out) {
  static const std::set<std::string> kBinary = {"Add", "Sub", "Mul", "Div", "Pow"};
  if (kBinary.count(op) != (b != nullptr)) return false;
  for (size_t i = 0; i < kSampleCount; ++i) {
    double x = a[i], y = b ? (*b)[i] : 0.0;
    if (op == "Add") out[i] = x + y;
    else if (op == "Sub") out[i] = x - y;
    else if (op == "Mul") out[i] = x * y;
    else if (op == "Div") out[i] = x / y;
    else if (op == "Pow") out[i] = std::pow(x, y);
    else if (op == "Tanh") out[i] = std::tanh(x);
    else if (op == "Erf") out[i] = std::erf(x);
    else if (op == "Sqrt") out[i] = std::sqrt(x);
    else if (op == "Neg") out[i] = -x;
    else if (op == "Exp") out[i] = std::exp(x);
    else if (op == "Sigmoid") out[i] = 1.0 / (1.0 + std::exp(-x));
    else return false;
  }
  return true;
}

bool agrees(const Samples& v, double (*reference)(double)) {
  for (size_t i = 0; i < kSampleCount; ++i) {
    double r = reference(kSamples[i]);
    if (!(std::abs(v[i] - r) <= 1e-5 * (1.0 + std::abs(r)))) return false;
  }
  return true;
}

// The GELU computed from `x` by nodes after x's producer: its nodes (`chain`), the value it ends at
// (`output`) and whether it is the tanh approximation. Only a region whose values nothing outside
// it reads is taken, so that replacing it by one node loses nothing.
bool match_gelu_of(const Graph& g, const std::string& x, std::vector<int>& chain, std::string& output, bool& tanh) {
  std::map<std::string, Samples> known;
  std::copy(std::begin(kSamples), std::end(kSamples), known[x].begin());
  std::vector<int> region;
  const size_t first = static_cast<size_t>(g.producer(x) + 1);
  for (size_t i = first; i < std::min(g.nodes.size(), first + kMaxRegionSpan) && region.size() < kMaxRegionNodes; ++i) {
    const Node& n = g.nodes[i];
    if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs.size() > 2) continue;
    std::vector<Samples> in;
    bool reads_region = false, ok = true;
    for (const std::string& name : n.inputs) {
      float c;
      if (auto it = known.find(name); it != known.end()) {
        in.push_back(it->second);
        reads_region = true;
      } else if (g.scalar(name, c)) {
        in.push_back({});
        in.back().fill(c);
      } else {
        ok = false;
      }
    }
    Samples out;
    if (!ok || !reads_region || !evaluate(n.op, in[0], in.size() > 1 ? &in[1] : nullptr, out)) continue;
    known[n.outputs[0]] = out;
    region.push_back(static_cast<int>(i));
  }
  for (int end : region) {
    const std::string& v = g.nodes[end].outputs[0];
    bool erf_form = agrees(known[v], ops::gelu_reference), tanh_form = agrees(known[v], ops::gelu_tanh_reference);
    if (!erf_form && !tanh_form) continue;
    // The nodes `v` is computed by, back to x; each of their values read only among them.
    std::set<int> cone = {end};
    for (auto it = std::find(region.rbegin(), region.rend(), end); it != region.rend(); ++it)
      if (cone.count(*it))
        for (const std::string& name : g.nodes[*it].inputs)
          if (int p = g.producer(name); p >= 0 && name != x && known.count(name)) cone.insert(p);
    bool closed = true;
    for (int c : cone) {
      const std::string& value = g.nodes[c].outputs[0];
      if (c == end) continue;
      int inside = 0;
      for (int r : cone) inside += static_cast<int>(std::count(g.nodes[r].inputs.begin(), g.nodes[r].inputs.end(), value));
      closed = closed && inside == g.readers(value);
    }
    if (!closed || cone.size() < 2) continue;
    chain.assign(cone.begin(), cone.end());
    output = v;
    tanh = tanh_form;
    return true;
  }
  return false;
}

// The GELU a Tanh or Erf node is part of: its x is among the tensors its region reads, found
// walking back from the node through the elementwise nodes before it.
bool match_gelu(const Graph& g, int at, std::vector<int>& chain, std::string& input, std::string& output, bool& tanh) {
  std::vector<std::string> frontier = {g.nodes[at].inputs.at(0)}, tried;
  for (int depth = 0; depth < 6 && !frontier.empty(); ++depth) {
    std::vector<std::string> next;
    for (const std::string& name : frontier) {
      if (std::count(tried.begin(), tried.end(), name)) continue;
      tried.push_back(name);
      float c;
      if (g.scalar(name, c)) continue;
      if (match_gelu_of(g, name, chain, output, tanh)) {
        input = name;
        return true;
      }
      if (int p = g.producer(name); p >= 0 && g.nodes[p].inputs.size() <= 2 && g.nodes[p].outputs.size() == 1)
        next.insert(next.end(), g.nodes[p].inputs.begin(), g.nodes[p].inputs.end());
    }
    frontier = std::move(next);
  }
  return false;
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

// A ReduceMean over the last axis alone, keeping it (as a row-wise step's statistic is read). A
// LayerNorm written over another axis (timm's channels-first LayerNorm2d: the mean over axis 1)
// stays as its nodes.
bool means_last_axis(const Graph& g, const Node& mean) {
  const Value* x = mean.inputs.empty() ? nullptr : g.find(mean.inputs[0]);
  std::vector<int64_t> axes = mean.ints_attr("axes");
  if (mean.op != "ReduceMean" || !x || x->shape.empty() || axes.size() != 1 || mean.int_attr("keepdims", 1) == 0) return false;
  auto rank = static_cast<int64_t>(x->shape.size());
  return axes[0] == -1 || axes[0] == rank - 1;
}

bool match_layer_norm(const Graph& g, int mean, std::vector<int>& chain, std::string& input, std::string& output,
                      std::vector<std::string>& affine, float& eps) {
  const Node& m = g.nodes[mean];
  if (!means_last_axis(g, m)) return false;
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
  if (var < 0 || !means_last_axis(g, g.nodes[var])) return false;
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

// RMSNorm as LLaMA, T5 and Mistral write it (Hugging Face's, through either exporter):
// ReduceMean(Pow(x, 2) or Mul(x, x)) -> Add(eps) -> Sqrt, then Div(x, that) or
// Mul(x, Reciprocal(that)), then Mul by a constant weight where there is one (either order).
bool match_rms_norm(const Graph& g, int mean, std::vector<int>& chain, std::string& input, std::string& output,
                    std::string& weight, float& eps) {
  const Node& m = g.nodes[mean];
  int square = g.producer(m.inputs[0]);
  if (square < 0 || !means_last_axis(g, m) || g.readers(m.inputs[0]) != 1) return false;
  const Node& sq = g.nodes[square];
  float k;
  if (sq.op == "Pow" && sq.inputs.size() == 2 && g.scalar(sq.inputs[1], k) && k == 2.f) input = sq.inputs[0];
  else if (sq.op == "Mul" && sq.inputs.size() == 2 && sq.inputs[0] == sq.inputs[1]) input = sq.inputs[0];
  else return false;
  int add = next(g, m.outputs[0], "Add");
  if (add < 0 || !g.scalar(other_input(g.nodes[add], m.outputs[0]), eps)) return false;
  int sqrt = next(g, g.nodes[add].outputs[0], "Sqrt");
  if (sqrt < 0) return false;
  const std::string& root = g.nodes[sqrt].outputs[0];
  chain = {square, mean, add, sqrt};
  int scaled = g.only_reader(root);
  if (scaled < 0) return false;
  const Node& r = g.nodes[scaled];
  if (r.op == "Div" && r.inputs.size() == 2 && r.inputs[0] == input && r.inputs[1] == root) {
    chain.push_back(scaled);
  } else if (r.op == "Reciprocal") {
    int mul = next(g, r.outputs[0], "Mul");
    if (mul < 0 || other_input(g.nodes[mul], r.outputs[0]) != input) return false;
    chain.push_back(scaled);
    chain.push_back(mul);
  } else {
    return false;
  }
  output = g.nodes[chain.back()].outputs[0];
  const Value* x = g.find(input);
  if (int scale = next(g, output, "Mul"); scale >= 0 && x && !x->shape.empty()) {
    const Value* w = g.find(other_input(g.nodes[scale], output));
    if (w && w->constant && w->is_float && w->shape == std::vector<int64_t>{x->shape.back()}) {
      chain.push_back(scale);
      weight = w->name;
      output = g.nodes[scale].outputs[0];
    }
  }
  return true;
}

}  // namespace

StatusOr<int> fuse_patterns(Graph& graph) {
  int fused = 0;
  // After a fusion the search goes on from the first node it replaced: the nodes before are as
  // they were, and matched nothing.
  size_t start = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = start; i < graph.nodes.size() && !changed; ++i) {
      std::vector<int> chain;
      std::string input, output;
      Node replacement;
      bool tanh = false;
      if ((graph.nodes[i].op == "Erf" || graph.nodes[i].op == "Tanh") &&
          match_gelu(graph, static_cast<int>(i), chain, input, output, tanh)) {
        replacement.op = "Gelu";
        replacement.inputs = {input};
        if (tanh) replacement.attributes["approximate"].s = "tanh";
      } else if (graph.nodes[i].op == "Softplus" && match_mish(graph, static_cast<int>(i), chain, input, output)) {
        replacement.op = "Mish";
        replacement.inputs = {input};
      } else if (graph.nodes[i].op == "ReduceMean") {
        std::vector<std::string> affine;
        std::string weight;
        float eps = 0;
        if (match_layer_norm(graph, static_cast<int>(i), chain, input, output, affine, eps)) {
          replacement.op = "LayerNormalization";
          replacement.inputs = {input};
          replacement.inputs.insert(replacement.inputs.end(), affine.begin(), affine.end());
        } else if (match_rms_norm(graph, static_cast<int>(i), chain, input, output, weight, eps)) {
          replacement.op = "RMSNormalization";
          replacement.inputs = {input};
          if (!weight.empty()) replacement.inputs.push_back(weight);
        } else {
          continue;
        }
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
      start = static_cast<size_t>(*std::min_element(chain.begin(), chain.end()));
      changed = true;
    }
  }
  return fused;
}

}  // namespace tunefarm::model
