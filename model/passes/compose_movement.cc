#include "model/passes/compose_movement.h"

#include <algorithm>
#include <optional>

namespace tunefarm::model {
namespace {

bool selects(const Node& t) { return t.attributes.count("select_axis") > 0; }

// The rank of the axes a Transpose moves (its output's), or -1 when its input's shape is unknown
// or its perm does not fit it.
int64_t moved_rank(const Graph& g, const Node& t) {
  const Value* in = g.find(t.inputs.empty() ? "" : t.inputs[0]);
  if (!in || t.inputs.size() != 1 || t.outputs.size() != 1) return -1;
  int64_t rank = static_cast<int64_t>(in->shape.size()) - (selects(t) ? 1 : 0);
  std::vector<int64_t> perm = transpose_perm(t, static_cast<size_t>(std::max<int64_t>(rank, 0)));
  return static_cast<int64_t>(perm.size()) == rank && is_permutation(perm) ? rank : -1;
}

// The Transpose writing `value` with a perm that fits it, or -1.
int transpose_producer(const Graph& g, const std::string& value) {
  int p = g.producer(value);
  return p >= 0 && g.nodes[p].op == "Transpose" && moved_rank(g, g.nodes[p]) >= 0 ? p : -1;
}

// Gather(Transpose(x, perm), i, axis a) as one Transpose of x, in place; false where it is not
// that (indices not one constant scalar, an axis out of range).
bool fold_gather(const Graph& g, Node& gather) {
  if (gather.op != "Gather" || gather.inputs.size() != 2 || gather.outputs.size() != 1) return false;
  int t = transpose_producer(g, gather.inputs[0]);
  const Value* idx = g.find(gather.inputs[1]);
  if (t < 0 || !idx || !idx->constant || idx->is_float || !idx->shape.empty() || idx->ints.size() != 1) return false;
  const Node& inner = g.nodes[t];
  // A second selected axis is not composed (no exporter writes it).
  if (selects(inner)) return false;
  const Value* x = g.find(inner.inputs[0]);
  int64_t rank = moved_rank(g, inner);
  int64_t a = gather.int_attr("axis", 0);
  if (a < 0) a += rank;
  if (a < 0 || a >= rank) return false;
  std::vector<int64_t> perm = transpose_perm(inner, static_cast<size_t>(rank));
  int64_t selected = perm[static_cast<size_t>(a)];
  int64_t dim = x->shape[static_cast<size_t>(selected)];
  int64_t index = idx->ints[0] < 0 ? idx->ints[0] + dim : idx->ints[0];
  if (index < 0 || index >= dim) return false;
  // The output's axes are the Transpose's but a; each reads x's axis perm[d], numbered among x's
  // axes less the selected one.
  std::vector<int64_t> composed;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == a) continue;
    int64_t q = perm[static_cast<size_t>(d)];
    composed.push_back(q > selected ? q - 1 : q);
  }
  Node folded = gather;
  folded.op = "Transpose";
  folded.inputs = {inner.inputs[0]};
  folded.attributes.clear();
  folded.attributes["perm"].ints = composed;
  folded.attributes["select_axis"].i = selected;
  folded.attributes["select_index"].i = index;
  absorb(folded, inner);
  gather = std::move(folded);
  return true;
}

// Transpose(Transpose(x, p1), p2) as Transpose(x, p1 . p2), in place.
bool fold_transpose(const Graph& g, Node& outer) {
  if (outer.op != "Transpose" || selects(outer)) return false;
  int t = transpose_producer(g, outer.inputs.empty() ? "" : outer.inputs[0]);
  int64_t rank = moved_rank(g, outer);
  if (t < 0 || rank < 0) return false;
  const Node& inner = g.nodes[t];
  std::vector<int64_t> p1 = transpose_perm(inner, static_cast<size_t>(rank)), p2 = transpose_perm(outer, static_cast<size_t>(rank));
  std::vector<int64_t> composed;
  for (int64_t e : p2) composed.push_back(p1[static_cast<size_t>(e)]);
  // Only where the composed copy reads x along its last axis, as vectors: one whose innermost axis
  // is another of x's gathers each vector from as many rows of x (ViT's k, transposed for the
  // scores, from the Q/K/V GEMM's output: rows 9 KiB apart, 0.095 ms where the Gather's copy
  // and then the transpose of that took 0.015 + 0.049).
  if (composed.back() != rank - 1) return false;
  Node folded = outer;
  folded.inputs = {inner.inputs[0]};
  folded.attributes = inner.attributes;
  folded.attributes["perm"].ints = composed;
  absorb(folded, inner);
  outer = std::move(folded);
  return true;
}

// The positions and channels of a map flattened to [N, L, C] or [N, C, L] (L = H x W) swapped by a
// Transpose beside the Reshape that flattens or unflattens the map (SegFormer's and PVT's Mix-FFN
// and spatial reduction: tokens -> [N, C, H, W] -> a convolution -> [N, C, L] -> tokens), as a
// 4-D Transpose of the map and a Reshape of its channels-last view:
//   Reshape(Transpose(x [N, L, C], [0, 2, 1]), [N, C, H, W])  ->  Transpose(Reshape(x, [N, H, W, C]), [0, 3, 1, 2])
//   Transpose(Reshape(y [N, C, H, W], [N, C, L]), [0, 2, 1])  ->  Reshape(Transpose(y, [0, 2, 3, 1]), [N, L, C])
// The 4-D Transpose writes or reads the convolution's channel blocks directly, a copy of whole
// vectors of channels (model/program.cc); the 3-D one moved the tensor's last axis, each vector
// gathered from rows L apart (SegFormer-B0's [128, 4096]: 0.93 ms, its rows 16 KiB apart on one
// cache set). Applied after the loop over nodes: it adds a node beside each one it rewrites.
struct Unflattened {
  size_t at;           // The Reshape (first form) or Transpose (second) rewritten.
  size_t inner;        // The Transpose (first form) or Reshape (second) it reads.
  std::string middle;  // The channels-last view between the two nodes.
  std::vector<int64_t> middle_shape;
};

bool is_swap_of_last_two(const Graph& g, const Node& n) {
  return n.op == "Transpose" && !selects(n) && moved_rank(g, n) == 3 && transpose_perm(n, 3) == std::vector<int64_t>{0, 2, 1};
}

std::optional<Unflattened> unflatten(const Graph& g, size_t at) {
  const Node& node = g.nodes[at];
  if ((node.op != "Reshape" && node.op != "Transpose") || node.outputs.size() != 1 || node.inputs.empty())
    return std::nullopt;
  const Value* out = g.find(node.outputs[0]);
  int p = g.producer(node.inputs[0]);
  if (!out || p < 0) return std::nullopt;
  const Node& inner = g.nodes[static_cast<size_t>(p)];
  const Value* x = g.find(inner.inputs.empty() ? "" : inner.inputs[0]);
  if (!x || inner.outputs.size() != 1) return std::nullopt;
  const auto& o = out->shape;
  const auto& xs = x->shape;
  if (node.op == "Reshape" && is_swap_of_last_two(g, inner) && o.size() == 4 && xs.size() == 3 && o[0] == xs[0] &&
      o[1] == xs[2] && o[2] * o[3] == xs[1])
    return Unflattened{at, static_cast<size_t>(p), node.outputs[0] + "/channels_last", {o[0], o[2], o[3], o[1]}};
  if (is_swap_of_last_two(g, node) && inner.op == "Reshape" && xs.size() == 4 && o.size() == 3 && o[0] == xs[0] &&
      o[2] == xs[1] && o[1] == xs[2] * xs[3])
    return Unflattened{at, static_cast<size_t>(p), node.outputs[0] + "/channels_last", {xs[0], xs[2], xs[3], xs[1]}};
  return std::nullopt;
}

int unflatten_transposes(Graph& graph) {
  std::vector<Unflattened> found;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (auto u = unflatten(graph, i); u && !graph.find(u->middle)) found.push_back(std::move(*u));
  // From the last back, so that each one's index still holds when it is rewritten.
  for (auto u = found.rbegin(); u != found.rend(); ++u) {
    Node& node = graph.nodes[u->at];
    const Node& inner = graph.nodes[u->inner];
    Value middle;
    middle.name = u->middle;
    middle.shape = u->middle_shape;
    middle.dtype = graph.find(inner.inputs[0])->dtype;
    graph.values[u->middle] = std::move(middle);
    Node first = node, second = node;
    first.inputs = {inner.inputs[0]};
    first.outputs = {u->middle};
    first.attributes.clear();
    second.inputs = {u->middle};
    second.attributes.clear();
    if (node.op == "Reshape") {
      first.op = "Reshape";
      first.inputs.push_back(graph.add_int_constant(u->middle + "/shape", u->middle_shape));
      second.op = "Transpose";
      second.attributes["perm"].ints = {0, 3, 1, 2};
    } else {
      first.op = "Transpose";
      first.attributes["perm"].ints = {0, 2, 3, 1};
      second.op = "Reshape";
      second.inputs.push_back(graph.add_int_constant(u->middle + "/shape", graph.find(node.outputs[0])->shape));
    }
    first.name = node.name + "/channels_last";
    absorb(second, inner);
    node = std::move(second);
    graph.nodes.insert(graph.nodes.begin() + static_cast<std::ptrdiff_t>(u->at), std::move(first));
  }
  return static_cast<int>(found.size());
}

// A node whose output is its input, element for element: Identity, Dropout at inference, a Cast
// of float32 to float32 (the dynamo exporter's around RMSNorm and softmax), an Expand to the shape
// the input has. Its readers may read the input instead.
bool copies(const Graph& g, const Node& n) {
  if (n.inputs.empty() || n.outputs.empty() || n.outputs[0].empty()) return false;
  const Value* in = g.find(n.inputs[0]);
  const Value* out = g.find(n.outputs[0]);
  if (!in || !out || in->shape != out->shape || in->dtype != out->dtype) return false;
  if (n.op == "Identity") return true;
  // Dropout's mask output, when asked for, is a value of its own.
  if (n.op == "Dropout") return n.outputs.size() == 1 || n.outputs[1].empty() || g.readers(n.outputs[1]) == 0;
  if (n.op == "Cast") return n.int_attr("to", 0) == 1 && in->dtype == "float32";
  return n.op == "Expand";
}

// Readers of a copy's output read its input (a graph output stays written by its node).
int drop_copies(Graph& graph) {
  int dropped = 0;
  for (size_t i = 0; i < graph.nodes.size();) {
    const Node& n = graph.nodes[i];
    if (!copies(graph, n) || std::count(graph.outputs.begin(), graph.outputs.end(), n.outputs[0])) {
      ++i;
      continue;
    }
    std::string from = n.outputs[0], to = n.inputs[0];
    for (Node& reader : graph.nodes)
      for (std::string& input : reader.inputs)
        if (input == from) input = to;
    graph.nodes.erase(graph.nodes.begin() + static_cast<std::ptrdiff_t>(i));
    ++dropped;
  }
  return dropped;
}

}  // namespace

StatusOr<int> compose_movement(Graph& graph) {
  int composed = drop_copies(graph) + unflatten_transposes(graph);
  // In topological order: a chain's inner links are composed before the outer ones read them.
  for (Node& node : graph.nodes)
    if (fold_gather(graph, node) || fold_transpose(graph, node)) ++composed;
  if (composed == 0) return 0;
  // Transposes nothing reads now, from the last node back (one may have fed another).
  for (size_t i = graph.nodes.size(); i-- > 0;) {
    const Node& n = graph.nodes[i];
    if ((n.op == "Transpose" || n.op == "Reshape") && n.outputs.size() == 1 && graph.readers(n.outputs[0]) == 0)
      graph.nodes.erase(graph.nodes.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return composed;
}

}  // namespace tunefarm::model
