#include "model/passes/pad_channels.h"

#include <set>

#include <fmt/format.h>

#include "model/operators.h"
#include "model/tasks.h"

namespace tunefarm::model {

int64_t padded_channels(int64_t channels) {
  constexpr int64_t kVector = 16;
  auto padded = [&] { return (channels + kVector - 1) / kVector * kVector; };
  if (channels <= 8 || channels % kVector == 0) return channels;
  // Many channels: a few percent of padding buys whole vectors where blocks of 24, 40 or 44 fill
  // two or three (SqueezeNet's classifier, 512->1000 at 13x13: 0.64 ms in blocks of 40, 0.73 ms
  // as 1008 in blocks of 16 where its 13 columns had one each).
  if (channels >= 160) return padded();
  // Counts of 8 or fewer stay (a squeeze-and-excitation's few channels, an image's three), as do
  // those in blocks of their own and the multiples of 8 below 64 (padding 8 of 24 or 56 costs
  // more than half-empty vectors save).
  int64_t block = channel_block(channels);
  if (block >= kVector || (block > 0 && channels < 64)) return channels;
  return padded();
}

namespace {

// Steps that compute each channel from that channel alone and keep zeros finite.
bool channelwise_unary(const std::string& op) {
  static const std::set<std::string> kOps = {"Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
                                             "LeakyRelu", "Elu", "Identity", "Mish"};
  return kOps.count(op) > 0;
}

bool channelwise_binary(const std::string& op) {
  static const std::set<std::string> kOps = {"Add", "Sub", "Mul", "Max", "Min"};
  return kOps.count(op) > 0;
}

// Pooling, and a reduction over rows and columns (with or without kept dimensions): zeros in,
// zeros out.
bool pooling(const Graph& graph, const Node& node) {
  static const std::set<std::string> kOps = {"MaxPool", "AveragePool"};
  return kOps.count(node.op) > 0 || reduces_rows_and_columns(graph, node);
}

std::vector<int64_t> with_channels(std::vector<int64_t> shape, int64_t channels) {
  shape[1] = channels;
  return shape;
}

class ChannelPadder {
 public:
  explicit ChannelPadder(Graph& graph) : g_(graph) {}

  StatusOr<int> run() {
    std::vector<Node> nodes = std::move(g_.nodes);
    g_.nodes.clear();
    for (Node& node : nodes) {
      bool done = false;
      if (node.op == "Conv") {
        done = conv(node);
      } else if (node.outputs.size() == 1 && !node.inputs.empty() && padded_.count(node.inputs[0]) &&
                 (channelwise_unary(node.op) || pooling(g_, node))) {
        done = channelwise(node);
      } else if (channelwise_binary(node.op) && node.outputs.size() == 1) {
        done = binary(node);
      }
      if (!done) {
        for (const std::string& in : node.inputs) logical(node, in);
        g_.nodes.push_back(std::move(node));
      }
    }
    for (const std::string& out : g_.outputs) {
      Node from;
      from.name = out;
      logical(from, out);
    }
    return convs_;
  }

 private:
  // Values written padded: the logical value's name -> the padded value's.
  std::map<std::string, std::string> padded_;
  // Logical values whose producers now write them padded, and which of those a Slice has made
  // again for a reader that needs the model's channels.
  std::set<std::string> written_padded_, sliced_;
  Graph& g_;
  int convs_ = 0;

  int64_t channels_of(const std::string& name) const { return g_.find(padded_.at(name))->shape[1]; }

  void add_node(const Node& from, const std::string& name, const std::string& op, std::vector<std::string> inputs,
                const std::string& output) {
    Node n;
    n.name = name;
    n.op = op;
    n.inputs = std::move(inputs);
    n.outputs = {output};
    n.sources = {from.name};
    g_.nodes.push_back(std::move(n));
  }

  // `node` writes its output padded to `channels`.
  void write_padded(Node& node, int64_t channels) {
    const std::string logical_name = node.outputs[0];
    Value v = *g_.find(logical_name);
    v.name = logical_name + "/padded";
    v.shape = with_channels(v.shape, channels);
    g_.values[v.name] = v;
    padded_[logical_name] = v.name;
    written_padded_.insert(logical_name);
    node.outputs[0] = v.name;
    g_.nodes.push_back(std::move(node));
  }

  // The model's channels of `name` for a reader that needs them: sliced out of the padded value
  // once, where its producer writes it padded.
  void logical(const Node& reader, const std::string& name) {
    if (!written_padded_.count(name) || sliced_.count(name)) return;
    sliced_.insert(name);
    int64_t channels = g_.find(name)->shape[1];
    std::string slice = name + "/unpadded";
    add_node(reader, slice, "Slice",
             {padded_.at(name), g_.add_int_constant(slice + "/starts", {0}), g_.add_int_constant(slice + "/ends", {channels}),
              g_.add_int_constant(slice + "/axes", {1})},
             name);
  }

  // `name` padded to `channels` (a 4-D value): as written, or padded with zeros by a Pad step.
  std::string padded(const Node& reader, const std::string& name, int64_t channels) {
    if (auto it = padded_.find(name); it != padded_.end()) return it->second;
    const Value* v = g_.find(name);
    Value p = *v;
    p.name = name + "/padded";
    p.constant = false;
    p.shape = with_channels(p.shape, channels);
    g_.values[p.name] = p;
    std::string pad = name + "/pad_channels";
    add_node(reader, pad, "Pad", {name, g_.add_int_constant(pad + "/pads", {0, 0, 0, 0, 0, channels - v->shape[1], 0, 0})}, p.name);
    padded_[name] = p.name;
    return p.name;
  }

  // Constant `v`, one value per channel ([K], a convolution's bias; [C, 1, 1] or [1, C, 1, 1], a
  // scaling: is_per_channel), with `padded` values, the new ones zero.
  std::string padded_per_channel(const Value& v, int64_t padded, const std::string& name) {
    Value p = v;
    p.name = name;
    p.shape[v.shape.size() == 4 ? 1 : 0] = padded;
    p.floats.resize(static_cast<size_t>(padded), 0.f);
    g_.values[name] = std::move(p);
    return name;
  }

  bool conv(Node& node) {
    if (node.inputs.size() < 2 || node.outputs.size() != 1) return false;
    const Value* x = g_.find(node.inputs[0]);
    const Value* w = g_.find(node.inputs[1]);
    if (!x || !w || x->shape.size() != 4 || w->shape.size() != 4 || !w->constant || !w->is_float) return false;
    int64_t group = node.int_attr("group", 1);
    int64_t k = w->shape[0], per_group = w->shape[1], c = x->shape[1];
    bool depthwise = group > 1 && group == c && k == c && per_group == 1;
    // A weight that does not fit its input (a hostile file's) is left for the build to refuse.
    if ((group != 1 && !depthwise) || (group == 1 && per_group != c) ||
        w->floats.size() != static_cast<size_t>(w->elements()))
      return false;
    int64_t cp = padded_.count(node.inputs[0]) ? channels_of(node.inputs[0]) : padded_channels(c);
    int64_t kp = depthwise ? cp : padded_channels(k);
    if (cp == c && kp == k) return false;
    std::string bias;
    if (node.inputs.size() > 2 && !node.inputs[2].empty()) {
      const Value* b = g_.find(node.inputs[2]);
      if (!b || !b->constant || !b->is_float || b->shape != std::vector<int64_t>{k}) return false;
      bias = padded_per_channel(*b, kp, node.name + "/bias_padded");
    }
    Value pw;
    pw.name = node.name + "/weight_padded";
    pw.constant = true;
    int64_t wc = depthwise ? 1 : cp, rs = w->shape[2] * w->shape[3];
    pw.shape = {kp, wc, w->shape[2], w->shape[3]};
    pw.floats.assign(static_cast<size_t>(kp * wc * rs), 0.f);
    for (int64_t o = 0; o < k; ++o)
      for (int64_t i = 0; i < per_group; ++i)
        for (int64_t t = 0; t < rs; ++t)
          pw.floats[static_cast<size_t>((o * wc + i) * rs + t)] = w->floats[static_cast<size_t>((o * per_group + i) * rs + t)];
    g_.values[pw.name] = std::move(pw);
    node.inputs[0] = cp != c ? padded(node, node.inputs[0], cp) : node.inputs[0];
    node.inputs[1] = node.name + "/weight_padded";
    if (!bias.empty()) node.inputs[2] = bias;
    if (depthwise) node.attributes["group"].i = cp;
    ++convs_;
    if (kp == k) {
      g_.nodes.push_back(std::move(node));
      return true;
    }
    write_padded(node, kp);
    return true;
  }

  // An activation, pooling or mean of a padded value: padded too. Other inputs (Clip's bounds) must be
  // scalars.
  bool channelwise(Node& node) {
    const Value* out = g_.find(node.outputs[0]);
    const Value* in = g_.find(node.inputs[0]);
    if (!out || !in || in->shape.size() != 4 || out->shape.size() < 2 || out->shape[1] != in->shape[1]) return false;
    for (size_t i = 1; i < node.inputs.size(); ++i) {
      const Value* v = node.inputs[i].empty() ? nullptr : g_.find(node.inputs[i]);
      if (v && (!v->constant || v->elements() != 1)) return false;
    }
    int64_t channels = channels_of(node.inputs[0]);
    node.inputs[0] = padded_.at(node.inputs[0]);
    write_padded(node, channels);
    return true;
  }

  // Add, Sub, Mul, Max or Min with a padded operand: padded too, its other operands padded alike
  // (a tensor of the same channels padded by a Pad step, a constant per channel with zeros), or
  // scalars.
  bool binary(Node& node) {
    const Value* out = g_.find(node.outputs[0]);
    if (!out || out->shape.size() != 4) return false;
    int64_t c = out->shape[1], cp = 0;
    for (const std::string& in : node.inputs)
      if (padded_.count(in)) cp = channels_of(in);
    if (cp == 0) return false;
    // Every operand first, then the Pads and constants: a node that stays as it is adds nothing.
    for (const std::string& in : node.inputs) {
      const Value* v = g_.find(in);
      bool fits = v && (padded_.count(in) || v->elements() == 1 || (v->shape.size() == 4 && v->shape[1] == c && !v->constant) ||
                        (v->constant && v->is_float && is_per_channel(*v, c)));
      if (!fits) return false;
    }
    std::vector<std::string> inputs;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const std::string& in = node.inputs[i];
      const Value* v = g_.find(in);
      if (padded_.count(in)) {
        inputs.push_back(padded_.at(in));
      } else if (v->elements() == 1) {
        inputs.push_back(in);
      } else if (v->constant) {
        inputs.push_back(padded_per_channel(*v, cp, fmt::format("{}/input{}_padded", node.name, i)));
      } else {
        inputs.push_back(padded(node, in, cp));
      }
    }
    node.inputs = std::move(inputs);
    write_padded(node, cp);
    return true;
  }
};

}  // namespace

StatusOr<int> pad_channels(Graph& graph) { return ChannelPadder(graph).run(); }

}  // namespace tunefarm::model
