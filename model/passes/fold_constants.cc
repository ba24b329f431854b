#include "model/passes/fold_constants.h"

#include <set>

#include <fmt/format.h>

namespace tunefarm::model {
namespace {

// out = in with its axes permuted by `perm` (out dimension i is in dimension perm[i]).
template <typename T>
std::vector<T> transpose(const std::vector<T>& in, const std::vector<int64_t>& shape, const std::vector<int64_t>& perm) {
  size_t rank = shape.size();
  std::vector<int64_t> out_shape(rank), in_strides(rank, 1);
  for (size_t i = rank; i-- > 1;) in_strides[i - 1] = in_strides[i] * shape[i];
  for (size_t i = 0; i < rank; ++i) out_shape[i] = shape[perm[i]];
  std::vector<T> out(in.size());
  std::vector<int64_t> index(rank, 0);
  for (size_t n = 0; n < out.size(); ++n) {
    int64_t from = 0;
    for (size_t i = 0; i < rank; ++i) from += index[i] * in_strides[perm[i]];
    out[n] = in[from];
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < out_shape[i]) break;
      index[i] = 0;
    }
  }
  return out;
}

// The folded value of `node`, or false when it is not one this pass folds. The output's shape
// comes from shape inference, which has already run.
bool fold(const Graph& g, const Node& node, Value& out) {
  static const std::set<std::string> kOps = {"Identity", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast"};
  if (!kOps.count(node.op) || node.inputs.empty() || node.outputs.size() != 1) return false;
  const Value* in = g.find(node.inputs[0]);
  const Value* shape = g.find(node.outputs[0]);
  if (!in || !in->constant || !shape) return false;
  for (size_t i = 1; i < node.inputs.size(); ++i) {
    const Value* v = node.inputs[i].empty() ? nullptr : g.find(node.inputs[i]);
    if (!node.inputs[i].empty() && (!v || !v->constant)) return false;
  }
  out = *in;
  out.name = node.outputs[0];
  out.shape = shape->shape;
  if (out.elements() != in->elements()) return false;
  if (node.op == "Cast") {
    if (node.int_attr("to", 0) != 1 /* FLOAT */) return false;
    if (!in->is_float) {
      out.floats.assign(in->ints.begin(), in->ints.end());
      out.ints.clear();
      out.is_float = true;
    }
  } else if (node.op == "Transpose") {
    std::vector<int64_t> perm = node.ints_attr("perm");
    if (perm.empty())
      for (size_t i = in->shape.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    if (perm.size() != in->shape.size()) return false;
    for (int64_t p : perm)
      if (p < 0 || p >= static_cast<int64_t>(perm.size())) return false;
    if (in->is_float) out.floats = transpose(in->floats, in->shape, perm);
    else out.ints = transpose(in->ints, in->shape, perm);
  }
  return true;
}

}  // namespace

StatusOr<int> fold_constants(Graph& graph) {
  int folded = 0;
  std::vector<Node> kept;
  for (Node& node : graph.nodes) {
    Value value;
    if (fold(graph, node, value)) {
      graph.values[value.name] = std::move(value);
      ++folded;
    } else {
      kept.push_back(std::move(node));
    }
  }
  graph.nodes = std::move(kept);
  return folded;
}

}  // namespace tunefarm::model
