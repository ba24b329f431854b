#include "model/program.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/operators/operator.h"
#include "common/operators/winograd.h"
#include "compiler/ir/visitor.h"
#include "model/operators.h"
#include "model/passes/group_epilogues.h"
#include "model/tasks.h"

namespace tunefarm::model {
namespace {

constexpr int64_t kAlignment = 64;

int64_t aligned(int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// A dense layer's weight in the layout its kernel takes, from [K, N] (`kn`) or [N, K]: [N, K], or
// with `block` > 0 its column panels [ceil(N / block), K, block], the last one zero-padded.
Status add_dense_weight(Graph& graph, const Node& node, const std::string& from, const std::string& to, bool kn,
                        int64_t block) {
  if (graph.find(to)) return Status();
  TF_ASSIGN_OR_RETURN(const Value* w, graph.value_of(node, from));
  if (!w->constant || w->shape.size() != 2 || w->floats.size() != static_cast<size_t>(w->elements()))
    return invalid_argument(fmt::format("node '{}' ({}): weight '{}' must be a constant matrix", node.name, node.op, from));
  int64_t k = kn ? w->shape[0] : w->shape[1], n = kn ? w->shape[1] : w->shape[0];
  int64_t panels = block > 0 ? (n + block - 1) / block : 1, width = block > 0 ? block : n;
  Value t;
  t.name = to;
  t.shape = block > 0 ? std::vector<int64_t>{panels, k, block} : std::vector<int64_t>{n, k};
  t.constant = true;
  t.floats.assign(static_cast<size_t>(panels * k * width), 0.f);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) {
      size_t at = static_cast<size_t>(block > 0 ? (j / block * k + i) * block + j % block : j * k + i);
      t.floats[at] = w->floats[static_cast<size_t>(kn ? i * n + j : j * k + i)];
    }
  graph.values[to] = std::move(t);
  return Status();
}

// A convolution's OIHW weight packed to OIHW[ic]i[oc]o, [K/oc, C/ic, R, S, ic, oc]; a depthwise
// one's [C, 1, R, S] to [C/b, R, S, b] (the same with one input channel: ic = 1, oc = b).
StatusOr<const Value*> constant_oihw(const Graph& graph, const Node& node, const std::string& from) {
  TF_ASSIGN_OR_RETURN(const Value* w, graph.value_of(node, from));
  if (!w->constant || w->shape.size() != 4 || w->floats.size() != static_cast<size_t>(w->elements()))
    return invalid_argument(fmt::format("node '{}' ({}): weight '{}' must be a constant OIHW tensor", node.name, node.op, from));
  return w;
}

Status add_packed(Graph& graph, const Node& node, const std::string& from, const std::string& to, int64_t ic, int64_t oc) {
  if (graph.find(to)) return Status();
  TF_ASSIGN_OR_RETURN(const Value* w, constant_oihw(graph, node, from));
  int64_t K = w->shape[0], C = w->shape[1], R = w->shape[2], S = w->shape[3];
  if (C % ic != 0 || K % oc != 0)
    return invalid_argument(fmt::format("node '{}' ({}): weight {} does not split into blocks of {} and {}", node.name, node.op,
                                        shape_string(w->shape), ic, oc));
  Value p;
  p.name = to;
  p.shape = {K / oc, C / ic, R, S, ic, oc};
  p.constant = true;
  p.floats.resize(w->floats.size());
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t s = 0; s < S; ++s)
          p.floats[static_cast<size_t>(((((k / oc * (C / ic) + c / ic) * R + r) * S + s) * ic + c % ic) * oc + k % oc)] =
              w->floats[static_cast<size_t>(((k * C + c) * R + r) * S + s)];
  graph.values[to] = std::move(p);
  return Status();
}

// A convolution's OIHW weight transformed for its Winograd kernel (common/operators/winograd.h),
// group after group: a grouped convolution's kernel is called per group on that group's part.
Status add_winograd_weight(Graph& graph, const Node& node, const std::string& from, const std::string& to,
                           const operators::ConvShape& group) {
  if (graph.find(to)) return Status();
  TF_ASSIGN_OR_RETURN(const Value* w, constant_oihw(graph, node, from));
  int64_t groups = group.K > 0 ? w->shape[0] / group.K : 0;
  if (groups < 1 || w->shape[0] != groups * group.K || w->shape[1] != group.C || w->shape[2] != 3 || w->shape[3] != 3)
    return invalid_argument(fmt::format("node '{}' ({}): weight {} is not {} groups of a {}x{}x3x3 filter", node.name,
                                        node.op, shape_string(w->shape), groups, group.K, group.C));
  std::vector<int64_t> shape = operators::conv_weight_shape(group);
  int64_t per_group = 1;
  for (int64_t d : shape) per_group *= d;
  Value u;
  u.name = to;
  u.shape = shape;
  u.shape[2] *= groups;  // output-channel blocks of every group, each group's [alpha, alpha, ...] whole
  u.constant = true;
  u.floats.resize(static_cast<size_t>(per_group * groups));
  for (int64_t g = 0; g < groups; ++g)
    operators::winograd_weight(group, w->floats.data() + g * group.K * group.C * 9, u.floats.data() + g * per_group);
  graph.values[to] = std::move(u);
  return Status();
}

}  // namespace

const std::string& Program::storage(const std::string& name) const {
  auto it = storage_of.find(name);
  return it == storage_of.end() ? name : it->second;
}

namespace {

// The layout plan: activations stay in the channel blocks the blocked convolutions write and read
// (NCHW[x]c), from one such convolution to the next, through their epilogues (bias, residual add,
// activations, all elementwise in blocks); a value is converted to NCHW only where something that
// reads NCHW needs it, once, and to blocks only where a blocked convolution reads a value that is not.
bool has_reduction(const te::Operation& op) {
  if (!op || !op->reduce_axes.empty()) return op != nullptr;
  for (const auto& in : op->inputs)
    if (has_reduction(in)) return true;
  return false;
}

class Lowering {
 public:
  Lowering(Graph& graph, Program& p, const WorkloadForms& forms) : graph_(graph), p_(p), forms_(forms) {
    outputs_.insert(graph.outputs.begin(), graph.outputs.end());
    // An operator's epilogue reads its operands outside the node's inputs.
    for (const Node& n : graph.nodes)
      for (const Epilogue& e : n.epilogue)
        if (!e.operand.empty()) epilogue_operands_.insert(e.operand);
  }

  // A value holding `name` in NCHW.
  StatusOr<std::string> plain(const Node& node, const std::string& name) {
    const std::string root = p_.storage(name);
    auto it = block_.find(root);
    if (it == block_.end()) return name;
    std::string to = root + "/nchw";
    if (!graph_.find(to)) {
      TF_ASSIGN_OR_RETURN(const Value* v, graph_.value_of(node, root));
      Computed c = from_blocked_compute(*v, to, it->second);
      add_value(to, v->shape);
      add_step(node.name, "from NCHWc", c, true);
    }
    return to;
  }

  // A value holding `name` in NCHW[b]c.
  StatusOr<std::string> blocked(const Node& node, const std::string& name, int64_t b) {
    const std::string root = p_.storage(name);
    auto held = block_.find(root);
    if (held != block_.end() && held->second == b) return root;
    // Held in other blocks, and nothing has read it in NCHW yet: straight from those blocks.
    if (held != block_.end() && b > 1 && !graph_.find(root + "/nchw")) {
      const Value* r = graph_.find(root);
      const Value* v = graph_.find(name);
      std::string to = fmt::format("{}/nchw{}c", root, b);
      if (r && v && r->shape == v->shape && r->shape.size() == 4 && r->shape[1] % b == 0) {
        if (!graph_.find(to)) {
          add_value(to, r->shape);
          add_step(node.name, "reblock NCHWc", reblocked_compute(*r, to, held->second, b), true);
        }
        block_[to] = b;
        return to;
      }
    }
    TF_ASSIGN_OR_RETURN(std::string from, plain(node, name));
    // Blocks of one channel are NCHW itself.
    if (b == 1) return from;
    // Shaped as `from`: a view (ShuffleNet's channel shuffle) is 4-D where its storage is not.
    std::string to = fmt::format("{}/nchw{}c", from, b);
    if (!graph_.find(to)) {
      TF_ASSIGN_OR_RETURN(const Value* v, graph_.value_of(node, from));
      if (v->shape.size() != 4 || v->shape[1] % b != 0)
        return invalid_argument(fmt::format("node '{}' ({}): input {} is not NCHW in blocks of {}", node.name, node.op,
                                            shape_string(v->shape), b));
      Computed c = to_blocked_compute(*v, to, b);
      add_value(to, v->shape);
      add_step(node.name, "to NCHWc", c, true);
    }
    block_[to] = b;
    return to;
  }

  Status tuned(const Node& node) {
    TF_ASSIGN_OR_RETURN(TunedCall call, tuned_call_of(graph_, node, forms_));
    if (!call.dense_weight.empty())
      TF_RETURN_IF_ERROR(add_dense_weight(graph_, node, call.dense_weight, call.tensors[1], call.dense_weight_kn,
                                          operators::gemm_shape(call.workload).w_block));
    const std::string& out = node.outputs[0];
    if (call.output_block > 0) return blocked_conv(node, call);
    // Everything else reads NCHW (its runtime operands: constants have no layout).
    for (size_t i = 0; i + 1 < call.tensors.size(); ++i) {
      const Value* v = graph_.find(p_.storage(call.tensors[i]));
      if (v && !v->constant) {
        TF_ASSIGN_OR_RETURN(call.tensors[i], plain(node, call.tensors[i]));
      }
    }
    const std::string& raw = call.tensors.back();
    if (raw != out) add_value(raw, graph_.find(out)->shape);
    add_kernel_step(node, call);
    if (raw != out) {
      Node plain_operands = node;
      TF_RETURN_IF_ERROR(plain_epilogue_operands(plain_operands, call.remaining));
      TF_ASSIGN_OR_RETURN(Computed e, epilogue_compute(graph_, plain_operands, raw, call.remaining));
      add_step(node.name, "epilogue", e, true);
    }
    return Status();
  }

  // Views read NCHW and share its storage.
  Status view(const Node& node) {
    TF_ASSIGN_OR_RETURN(std::string in_name, plain(node, node.inputs.at(0)));
    TF_ASSIGN_OR_RETURN(const Value* in, graph_.value_of(node, in_name));
    TF_ASSIGN_OR_RETURN(const Value* out, graph_.value_of(node, node.outputs[0]));
    if (in->elements() != out->elements())
      return invalid_argument(fmt::format("node '{}' ({}): {} elements become {}", node.name, node.op, in->elements(),
                                          out->elements()));
    p_.storage_of[out->name] = p_.storage(in->name);
    return Status();
  }

  Status other(const Node& node) {
    if (!outputs_.count(node.outputs[0])) {
      TF_ASSIGN_OR_RETURN(bool done, stay_blocked(node));
      if (done) return Status();
    }
    if (node.op == "Transpose") {
      TF_ASSIGN_OR_RETURN(bool done, transpose_in_blocks(node));
      if (done) return Status();
    }
    // A range of channels out of blocks: read from them, written in NCHW.
    if (int64_t b = node.op == "Slice" ? block_of(node.inputs.at(0)) : 0; b > 0) {
      if (auto c = blocked_channel_slice_compute(graph_, node, p_.storage(node.inputs[0]), b); c.ok()) {
        add_step(node.name, "from NCHWc", *c, true);
        return Status();
      }
    }
    // Pooling and resizing between blocked convolutions stay in their blocks (ResNet's first
    // layers, DenseNet's transitions, YOLO's upsampling).
    bool resize = node.op == "Resize" || node.op == "Upsample";
    if (node.op == "MaxPool" || node.op == "AveragePool" || resize) {
      // block_of: a view of a blocked value in another shape is read as NCHW.
      int64_t b = block_of(node.inputs.at(0));
      if (b > 0 && !outputs_.count(node.outputs[0])) {
        const std::string& in = p_.storage(node.inputs[0]);
        auto c = resize ? blocked_resize_compute(graph_, node, in, b) : blocked_pool_compute(graph_, node, in, b);
        if (c.ok()) {
          add_step(node.name, node.op, *c, true);
          block_[node.outputs[0]] = b;
          return Status();
        }
      }
    }
    Node n = node;
    for (auto& in : n.inputs) {
      if (in.empty()) continue;
      TF_ASSIGN_OR_RETURN(in, plain(node, in));
    }
    TF_ASSIGN_OR_RETURN(Computed c, operator_compute(graph_, n));
    // Softmax and the normalizations vectorize across the row, their statistics in lanes too
    // (operators.cc's row_statistic), reductions of other axes along the last; other reductions
    // run scalar.
    bool pooling = node.op == "MaxPool" || node.op == "GlobalMaxPool" || node.op == "AveragePool";
    bool scalar_only = !pooling && !is_row_wise(graph_, node) && !reduces_along_last_axis_lanes(graph_, node) &&
                       has_reduction(c.def.output.op);
    add_step(node.name, node.op, c, !scalar_only, deferrable(node));
    return Status();
  }

 private:
  Status blocked_conv(const Node& node, TunedCall& call) {
    const std::string& out = node.outputs[0];
    TF_ASSIGN_OR_RETURN(call.tensors[0], blocked(node, node.inputs[0], call.input_block));
    if (call.residual_index > 0) {
      TF_ASSIGN_OR_RETURN(call.tensors[call.residual_index],
                          blocked(node, call.tensors[call.residual_index], call.output_block));
    }
    operators::ConvShape conv = operators::conv_shape(call.workload);
    if (conv.winograd > 0) {
      TF_RETURN_IF_ERROR(add_winograd_weight(graph_, node, node.inputs[1], call.tensors[1], conv));
    } else {
      // A depthwise filter has one input channel: its blocks are of output channels only.
      int64_t weight_ic = conv.depthwise ? 1 : call.input_block;
      TF_RETURN_IF_ERROR(add_packed(graph_, node, node.inputs[1], call.tensors[1], weight_ic, call.output_block));
    }
    // A model output leaves in NCHW: the epilogue converts it; every other output stays blocked.
    bool keep_blocked = !outputs_.count(out);
    if (keep_blocked && call.remaining.empty()) call.tensors.back() = out;
    const std::string raw = call.tensors.back();
    if (raw != out) add_value(raw, graph_.find(out)->shape);
    add_kernel_step(node, call);
    if (keep_blocked) {
      block_[out] = call.output_block;
      if (raw == out) return Status();
      std::vector<std::string> operands;
      for (const auto& e : call.remaining)
        if (e.op == "add") {
          TF_ASSIGN_OR_RETURN(std::string b, blocked(node, e.operand, call.output_block));
          operands.push_back(b);
        }
      TF_ASSIGN_OR_RETURN(Computed e, blocked_epilogue_compute(graph_, node, raw, call.remaining, operands, call.output_block));
      add_step(node.name, "epilogue", e, true);
      return Status();
    }
    Node plain_operands = node;
    TF_RETURN_IF_ERROR(plain_epilogue_operands(plain_operands, call.remaining));
    TF_ASSIGN_OR_RETURN(Computed e, epilogue_compute(graph_, plain_operands, raw, call.remaining, call.output_block));
    add_step(node.name, "epilogue", e, true);
    return Status();
  }

  // The block a value is kept in, 0 when NCHW; only for a value shaped as its storage (a view of
  // another shape reads NCHW).
  int64_t block_of(const std::string& name) const {
    const std::string& root = p_.storage(name);
    auto it = block_.find(root);
    if (it == block_.end()) return 0;
    const Value* v = graph_.find(name);
    const Value* r = graph_.find(root);
    return v && r && v->shape == r->shape ? it->second : 0;
  }

  // Elementwise steps and spatial reductions over blocked values stay in the blocks (a network's
  // activations, squeeze-and-excitation's pooling, gate and channel scaling between convolutions),
  // instead of a conversion to NCHW and back around each. False where the node is not such a step.
  StatusOr<bool> stay_blocked(const Node& node) {
    if (node.inputs.empty() || node.inputs[0].empty()) return false;
    if (reduces_rows_and_columns(graph_, node)) {
      int64_t b = block_of(node.inputs[0]);
      if (b == 0) return false;
      auto c = blocked_spatial_reduce_compute(graph_, node, p_.storage(node.inputs[0]), b);
      if (!c.ok()) return false;
      add_step(node.name, node.op, *c, true);
      // A mean without kept dimensions, [N, C], lies in channel order: NCHW.
      if (graph_.find(node.outputs[0])->shape.size() == 4) block_[node.outputs[0]] = b;
      return true;
    }
    if (node.op == "Concat") return concat_in_blocks(node);
    if (!is_blockable_elementwise(node.op)) return false;
    const Value* out = graph_.find(node.outputs[0]);
    if (!out || out->shape.size() != 4) return false;
    size_t operands = node.op == "Clip" ? 1 : node.inputs.size();
    int64_t b = 0;
    for (size_t i = 0; i < operands && b == 0; ++i) b = block_of(node.inputs[i]);
    if (b == 0 || out->shape[1] % b != 0) return false;
    // Every tensor operand has the output's channels (a per-channel gate or the full map); a
    // constant operand is a scalar or per channel (ConvNeXt's layer scale [C, 1, 1]): constants
    // are stored NCHW, which for one value per channel is their blocks too.
    for (size_t i = 0; i < operands; ++i) {
      const Value* v = graph_.find(node.inputs[i]);
      if (!v) return false;
      if (v->elements() == 1) continue;
      if (v->constant) {
        if (!is_per_channel(*v, out->shape[1])) return false;
        continue;
      }
      if (v->shape.size() != 4 || v->shape[1] != out->shape[1]) return false;
    }
    std::vector<std::string> names;
    for (size_t i = 0; i < operands; ++i) {
      const Value* v = graph_.find(node.inputs[i]);
      if (v->elements() == 1 || v->constant) {
        names.push_back(node.inputs[i]);
      } else {
        TF_ASSIGN_OR_RETURN(std::string blocked_name, blocked(node, node.inputs[i], b));
        names.push_back(blocked_name);
      }
    }
    TF_ASSIGN_OR_RETURN(Computed c, blocked_elementwise_compute(graph_, node, names, b));
    add_step(node.name, node.op, c, true, deferrable(node));
    block_[node.outputs[0]] = b;
    return true;
  }

  // A Concat along the channels of values in blocks (DenseNet's each layer) writes the same blocks
  // when every input is whole blocks of the first blocked input's; the others are converted.
  StatusOr<bool> concat_in_blocks(const Node& node) {
    const Value* out = graph_.find(node.outputs[0]);
    int64_t axis = node.int_attr("axis", 0);
    if (!out || out->shape.size() != 4 || (axis != 1 && axis != -3)) return false;
    int64_t b = 0;
    for (size_t i = 0; i < node.inputs.size() && b == 0; ++i) b = block_of(node.inputs[i]);
    if (b == 0) return false;
    for (const std::string& in : node.inputs) {
      const Value* v = graph_.find(in);
      if (!v || v->shape.size() != 4 || v->shape[1] % b != 0) return false;
    }
    std::vector<std::string> names;
    for (const std::string& in : node.inputs) {
      TF_ASSIGN_OR_RETURN(std::string name, blocked(node, in, b));
      names.push_back(name);
    }
    auto c = blocked_concat_compute(graph_, node, names, b);
    if (!c.ok()) return false;
    add_step(node.name, node.op, *c, true);
    block_[node.outputs[0]] = b;
    return true;
  }

  // A 4-D Transpose next to channel blocks moves its data once: from its input's blocks, or into
  // the blocks its readers take (wanted_block), instead of a conversion beside it.
  StatusOr<bool> transpose_in_blocks(const Node& node) {
    const std::string& out = node.outputs[0];
    const Value* o = graph_.find(out);
    if (node.attributes.count("select_axis") || !o || o->shape.size() != 4) return false;
    int64_t in_block = block_of(node.inputs.at(0));
    int64_t out_block = in_block > 0 || outputs_.count(out) ? 0 : wanted_block(out, 0);
    if (in_block == 0 && out_block == 0) return false;
    std::string in = node.inputs[0];
    if (in_block > 0) {
      in = p_.storage(in);
    } else {
      TF_ASSIGN_OR_RETURN(in, plain(node, in));
    }
    auto c = blocked_transpose_compute(graph_, node, in, in_block, out_block);
    if (!c.ok()) return false;
    add_step(node.name, node.op, *c, true, deferrable(node));
    if (out_block > 0) block_[out] = out_block;
    return true;
  }

  // The channel block in which a blocked convolution would read NCHW `value`, directly or through
  // elementwise steps that stay in blocks after it (stay_blocked), or in which an elementwise step
  // that reads it with an operand already in blocks would; 0 when none does.
  int64_t wanted_block(const std::string& value, int depth) const {
    constexpr int kMaxDepth = 4;
    const Value* v = graph_.find(value);
    if (depth > kMaxDepth || !v) return 0;
    for (const Node& reader : graph_.nodes) {
      if (reader.outputs.empty() || std::find(reader.inputs.begin(), reader.inputs.end(), value) == reader.inputs.end())
        continue;
      if (is_tunable(reader.op)) {
        auto call = tuned_call_of(graph_, reader, forms_);
        if (reader.inputs[0] == value && call.ok() && call->output_block > 0 && call->input_block > 1 &&
            v->shape[1] % call->input_block == 0)
          return call->input_block;
      } else if (is_blockable_elementwise(reader.op) && !outputs_.count(reader.outputs[0])) {
        const Value* r = graph_.find(reader.outputs[0]);
        if (!r || r->shape != v->shape) continue;
        // An operand already in blocks keeps the step in them (ConvNeXt's residual add).
        for (const std::string& other : reader.inputs)
          if (int64_t b = other != value ? block_of(other) : 0; b > 0 && v->shape[1] % b == 0) return b;
        if (int64_t b = wanted_block(reader.outputs[0], depth + 1); b > 0) return b;
      }
    }
    return 0;
  }

  // The added tensors of `epilogues` in NCHW (bias operands are constants).
  Status plain_epilogue_operands(const Node& node, std::vector<Epilogue>& epilogues) {
    for (auto& e : epilogues) {
      if (e.op != "add") continue;
      TF_ASSIGN_OR_RETURN(e.operand, plain(node, e.operand));
    }
    return Status();
  }

  void add_value(const std::string& name, const std::vector<int64_t>& shape) {
    Value v;
    v.name = name;
    v.shape = shape;
    graph_.values[name] = std::move(v);
  }

  void add_kernel_step(const Node& node, const TunedCall& call) {
    for (const std::string& t : call.tensors) flush(t);
    p_.steps.push_back(Step{node.name, node.op, call.workload, {}, call.tensors, false, call.groups, call.group_strides});
  }

  // A step; with `defer`, held back to be computed inside the step that reads its output
  // (inline_into) rather than run on its own.
  void add_step(const std::string& node, const std::string& op, const Computed& c, bool vectorize, bool defer = false) {
    Step step{node, op, std::nullopt, c.def, c.tensors, vectorize, 1, {}};
    inline_into(step);
    if (defer && vectorize && single_stage(step.compute)) {
      pending_[step.tensors.back()] = std::move(step);
      return;
    }
    p_.steps.push_back(std::move(step));
  }

 public:
  // Runs every step still held back (none is, once each reader has taken its producer in).
  void flush_all() {
    while (!pending_.empty()) flush(pending_.begin()->first);
  }

 private:
  // Elementwise steps (and Transposes) whose only reader is an elementwise step are not run on their
  // own: the reader computes them where it loads their output, which never goes to memory
  // (DenseNet's batch norm as Mul and Add before its ReLU; ConvNeXt's Transpose back to channels
  // first and its layer scale, before the residual add).
  bool deferrable(const Node& node) const {
    const std::string& out = node.outputs[0];
    if ((!is_blockable_elementwise(node.op) && node.op != "Transpose") || outputs_.count(out)) return false;
    int r = graph_.only_reader(out);
    return r >= 0 && is_blockable_elementwise(graph_.nodes[r].op) && !epilogue_operands_.count(out);
  }

  static bool single_stage(const ops::ComputeDef& def) {
    const te::Operation& op = def.output.op;
    if (!op || op->kind != te::OperationNode::Kind::kCompute || !op->reduce_axes.empty()) return false;
    return std::all_of(op->inputs.begin(), op->inputs.end(),
                       [](const te::Operation& in) { return in->kind == te::OperationNode::Kind::kPlaceholder; });
  }

  void flush(const std::string& value) {
    auto it = pending_.find(value);
    if (it == pending_.end()) return;
    Step step = std::move(it->second);
    pending_.erase(it);
    p_.steps.push_back(std::move(step));
  }

  // Takes into `consumer` each held-back step whose output it reads: the loads of that output
  // become the producer's expression at their indices, the producer's inputs the consumer's. A
  // producer the consumer cannot take (a consumer of several stages, loads of it at two indices)
  // runs first.
  void inline_into(Step& consumer) {
    for (size_t k = 0; k + 1 < consumer.tensors.size(); ++k) {
      auto it = pending_.find(consumer.tensors[k]);
      if (it == pending_.end()) continue;
      Step producer = std::move(it->second);
      pending_.erase(it);
      if (!inline_step(consumer, k, producer)) {
        p_.steps.push_back(std::move(producer));
        continue;
      }
      k = static_cast<size_t>(-1);  // The consumer's inputs changed: look at them all again.
    }
  }

  static bool inline_step(Step& consumer, size_t k, const Step& producer) {
    const ops::ComputeDef& c = consumer.compute;
    const ops::ComputeDef& p = producer.compute;
    if (!single_stage(c) || !consumer.vectorize || k >= c.inputs.size()) return false;
    const ir::BufferNode* target = c.inputs[k].op->buffer.get();
    if (c.inputs[k].shape() != p.output.shape()) return false;
    // Loads of it at one index only (an activation that reads its input twice, as ELU's select
    // does, reads the same element: the code generator computes the producer's expression once).
    const ir::Load* first = nullptr;
    bool one_index = true;
    ir::post_order_visit(c.output.op->body, [&](const ir::Expr& e) {
      const auto* l = e->as<ir::Load>();
      if (!l || l->buffer.get() != target) return;
      if (!first) first = l;
      else one_index = one_index && l->indices.size() == first->indices.size() &&
                       std::equal(l->indices.begin(), l->indices.end(), first->indices.begin(),
                                  [](const ir::Expr& a, const ir::Expr& b) { return ir::equal(a, b); });
    });
    if (!first || !one_index) return false;
    // The fused step's inputs: the consumer's but the producer's output, then the producer's
    // that the consumer does not read already (those it does are loaded from its placeholder).
    std::vector<te::Tensor> inputs;
    std::vector<std::string> names;
    for (size_t i = 0; i + 1 < consumer.tensors.size(); ++i)
      if (i != k) inputs.push_back(c.inputs[i]), names.push_back(consumer.tensors[i]);
    std::map<const ir::BufferNode*, ir::Buffer> same;
    for (size_t j = 0; j < p.inputs.size(); ++j) {
      auto at = std::find(names.begin(), names.end(), producer.tensors[j]);
      if (at != names.end()) {
        same[p.inputs[j].op->buffer.get()] = inputs[static_cast<size_t>(at - names.begin())].op->buffer;
      } else {
        inputs.push_back(p.inputs[j]);
        names.push_back(producer.tensors[j]);
      }
    }
    struct Inline : ir::IRMutator {
      const ir::BufferNode* target;
      const te::Operation& producer;
      const std::map<const ir::BufferNode*, ir::Buffer>& same;
      Inline(const ir::BufferNode* t, const te::Operation& p, const std::map<const ir::BufferNode*, ir::Buffer>& s)
          : target(t), producer(p), same(s) {}
      ir::Expr mutate_load(const ir::Expr& e, const ir::Load* op) override {
        if (auto it = same.find(op->buffer.get()); it != same.end()) {
          std::vector<ir::Expr> idx;
          for (const auto& i : op->indices) idx.push_back(mutate(i));
          return ir::load(it->second, std::move(idx), op->predicate);
        }
        if (op->buffer.get() != target) return ir::IRMutator::mutate_load(e, op);
        ir::VarMap at;
        for (size_t d = 0; d < producer->axes.size(); ++d) at[producer->axes[d]->var.get()] = mutate(op->indices[d]);
        // The producer's own loads of inputs the consumer also reads go to the consumer's placeholder.
        return mutate(ir::substitute(producer->body, at));
      }
    };
    Inline inline_loads(target, p.output.op, same);
    auto fused = std::make_shared<te::OperationNode>(*c.output.op);
    fused->body = inline_loads.mutate(c.output.op->body);
    fused->inputs.clear();
    for (const te::Tensor& t : inputs) fused->inputs.push_back(t.op);
    names.push_back(consumer.tensors.back());
    consumer.compute = ops::ComputeDef{inputs, te::Tensor{fused}};
    consumer.tensors = std::move(names);
    return true;
  }

  Graph& graph_;
  Program& p_;
  const WorkloadForms& forms_;
  std::set<std::string> outputs_;
  std::set<std::string> epilogue_operands_;  // Values an operator's epilogue reads.
  std::map<std::string, int64_t> block_;  // Storage value -> the channel block it is kept in.
  std::map<std::string, Step> pending_;   // Held-back steps by the value they write.
};

}  // namespace

StatusOr<Program> lower_graph(Graph graph, const WorkloadForms& forms) {
  // A shape a file declares past any memory (a Resize by 1e9, a Tile by 1e5 each way: shape
  // inference computes it, nothing allocates it) is refused before its element counts overflow
  // the steps' index arithmetic.
  constexpr int64_t kMaxTensorElements = int64_t{1} << 32;
  for (const auto& [name, v] : graph.values)
    if (v.elements() > kMaxTensorElements)
      return invalid_argument(fmt::format("value '{}' has shape {}: more than 2^32 elements, past what a built model holds",
                                          name, shape_string(v.shape)));
  Program p;
  // An integer input (token ids, an attention mask) is converted to float32 once, by the first
  // steps, and every node reads the converted value: what is computed from it is held as float32.
  for (const std::string& in : graph.inputs) {
    TF_ASSIGN_OR_RETURN(Computed c, input_cast_compute(graph, in));
    if (c.tensors.empty()) continue;
    if (std::count(graph.outputs.begin(), graph.outputs.end(), in))
      return invalid_argument(fmt::format(
          "input '{}' ({}) is also a model output: a built model does not pass an integer input through", in,
          graph.find(in)->dtype));
    const std::string& to = c.tensors.back();
    Value v = *graph.find(in);
    v.name = to;
    v.is_float = true;
    v.dtype = "float32";
    graph.values[to] = std::move(v);
    for (Node& node : graph.nodes)
      for (std::string& name : node.inputs)
        if (name == in) name = to;
    p.steps.push_back(Step{in, "Cast", std::nullopt, c.def, c.tensors, true, 1, {}});
  }
  // An integer or boolean output (ArgMax's labels, a Cast to int64, a comparison) is computed as
  // float32 like every value, as "<output>/float32", and a last step converts it into the caller's
  // buffer: the library's output is of the type the file declares. Other outputs are float32.
  std::vector<std::pair<std::string, std::string>> integer_outputs;  // (output, the float32 value)
  for (const std::string& out : graph.outputs) {
    Value* v = graph.find(out);
    if (!v) continue;
    bool produced = std::any_of(graph.nodes.begin(), graph.nodes.end(), [&](const Node& n) {
      return std::count(n.outputs.begin(), n.outputs.end(), out) > 0;
    });
    if (!produced || !interface_type(v->dtype) ||
        std::count(graph.outputs.begin(), graph.outputs.end(), out) > 1) {
      v->dtype = "float32";
      continue;
    }
    std::string held = out + "/float32";
    Value f = *v;
    f.name = held;
    f.dtype = "float32";
    f.is_float = true;
    graph.values[held] = std::move(f);
    for (Node& node : graph.nodes)
      for (auto* names : {&node.inputs, &node.outputs})
        for (std::string& name : *names)
          if (name == out) name = held;
    integer_outputs.emplace_back(out, held);
  }
  Lowering lowering(graph, p, forms);
  for (const Node& node : graph.nodes) {
    if (node.outputs.empty()) continue;
    if (is_tunable(node.op)) TF_RETURN_IF_ERROR(lowering.tuned(node));
    else if (is_view(node.op)) TF_RETURN_IF_ERROR(lowering.view(node));
    else TF_RETURN_IF_ERROR(lowering.other(node));
  }
  lowering.flush_all();
  // A model output that is a view of another value gets its own copy: the caller's buffer is
  // where outputs go.
  for (const std::string& out : graph.outputs) {
    auto it = p.storage_of.find(out);
    bool is_input = std::count(graph.inputs.begin(), graph.inputs.end(), out) > 0;
    if (it == p.storage_of.end() && !is_input) continue;
    std::string from = it == p.storage_of.end() ? out : it->second;
    if (it != p.storage_of.end()) {
      // The steps before read the view where it lies; the caller's buffer holds it only after the
      // copy, last (an exporter's output that later steps also read, as a 1-D convolution's).
      for (Step& step : p.steps) std::replace(step.tensors.begin(), step.tensors.end(), out, from);
      p.storage_of.erase(it);
    }
    const Value* v = graph.find(from);
    if (!v) return invalid_argument(fmt::format("model output '{}' has no value", out));
    Computed c = copy_compute(*v, out);
    p.steps.push_back(Step{out, "copy", std::nullopt, c.def, c.tensors, true, 1, {}});
  }
  for (const auto& [out, held] : integer_outputs) {
    Computed c = output_cast_compute(*graph.find(held), *graph.find(out));
    p.steps.push_back(Step{out, "Cast", std::nullopt, c.def, c.tensors, true, 1, {}});
  }
  p.graph = std::move(graph);
  return p;
}

Status check_buildable(const Graph& graph) {
  std::vector<std::string> refused;
  for (const Node& node : graph.nodes) {
    if (node.outputs.empty() || is_view(node.op)) continue;
    Status s = is_tunable(node.op) ? tuned_call_of(graph, node).status() : operator_compute(graph, node).status();
    if (!s.ok()) refused.push_back(s.message());
  }
  if (refused.size() > 1)
    return invalid_argument(fmt::format("{} nodes cannot be built: {}", refused.size(), fmt::join(refused, "; ")));
  if (refused.size() == 1) return invalid_argument(refused[0]);
  // What only the lowering finds (a layout a node cannot take).
  return lower_graph(graph).status();
}

MemoryPlan plan_memory(const Program& program) {
  const Graph& g = program.graph;
  std::set<std::string> external(g.inputs.begin(), g.inputs.end());
  external.insert(g.outputs.begin(), g.outputs.end());
  struct Life {
    int64_t bytes = 0;
    size_t first = 0, last = 0;
  };
  std::map<std::string, Life> lives;
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const auto& tensors = program.steps[s].tensors;
    for (size_t t = 0; t < tensors.size(); ++t) {
      const std::string& root = program.storage(tensors[t]);
      const Value* v = g.find(root);
      if (!v || v->constant || external.count(root)) continue;
      auto [it, fresh] = lives.try_emplace(root);
      if (fresh) {
        it->second.bytes = aligned(std::max<int64_t>(1, v->elements()) * 4);
        it->second.first = s;
      }
      it->second.last = s;
    }
  }
  MemoryPlan plan;
  std::vector<std::pair<std::string, Life>> order(lives.begin(), lives.end());
  // Largest first: the big activations settle at the bottom and the small ones fill the gaps.
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
  std::vector<std::pair<int64_t, Life>> placed;  // Offset and life of each value placed so far.
  for (const auto& [name, life] : order) {
    plan.naive_bytes += life.bytes;
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (const auto& [offset, other] : placed)
      if (other.first <= life.last && life.first <= other.last) taken.push_back({offset, offset + other.bytes});
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : taken) {
      if (offset + life.bytes <= lo) break;
      offset = std::max(offset, hi);
    }
    plan.offsets[name] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + life.bytes);
    placed.push_back({offset, life});
  }
  return plan;
}

}  // namespace tunefarm::model
