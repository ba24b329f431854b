#include "model/tasks.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "common/operators/operator.h"
#include "common/operators/winograd.h"
#include "compiler/ops/op.h"
#include "model/passes/group_epilogues.h"
#include "model/passes/passes.h"
#include "model/program.h"

namespace tunefarm::model {

// Measured on AVX-512: a block of 8 leaves every vector half empty (a 1x1 convolution 16->72 at
// 56x56 took 0.126 ms in blocks of 8, 0.074 ms in blocks of 24, as long as one to 80 channels in
// blocks of 16; 24->88 at 28x28 0.028 ms in blocks of 8, 0.019 in blocks of 44). Wider blocks of
// four vectors lost: 120 channels in blocks of 60 ran a 5x5 depthwise convolution at 0.6x and a
// 1x1 at 0.87x the speed of blocks of 40.
int64_t channel_block(int64_t channels) {
  if (channels % 16 == 0) return 16;
  for (int64_t b : {40, 44, 24, 8})
    if (channels % b == 0) return b;
  return 0;
}

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Status unsupported(const Node& node, const std::string& why) {
  return invalid_argument(fmt::format("node '{}' ({}): {}", node.name, node.op, why));
}

StatusOr<Workload> make_workload(const Node& node, const std::string& text) {
  auto w = parse_workload(text);
  if (!w.ok()) return unsupported(node, fmt::format("{} is not a workload tunefarm can tune: {}", text, w.status().message()));
  return w;
}

// The channel blocks of a convolution run channel-blocked (conv2d_nchwc): output channels in
// channel_block's blocks, input channels in the block their producer keeps them in (channel_block's
// too), else in blocks of 4, or of one when there are fewer than 4. {0, 0} keeps NCHW: channel
// counts the blocks do not divide.
std::pair<int64_t, int64_t> conv_blocks(int64_t c, int64_t k) {
  int64_t oc = channel_block(k);
  if (oc == 0) return {0, 0};
  if (int64_t ic = channel_block(c); ic > 0) return {ic, oc};
  if (c % 4 == 0) return {4, oc};
  // A first layer's colour channels in blocks of one: NCHW as it comes, [N, C, H, W, 1], read
  // where it lies (program.cc) instead of first copied to [N, 1, H, W, C] (a 3x224x224 input: 0.038
  // ms, 5% of a MobileNetV3-Small); its output is what the blocked layers read.
  if (c < 4) return {1, oc};
  return {0, 0};
}

// A convolution's epilogues in order: its own bias input first, then what the passes folded in.
std::vector<Epilogue> conv_epilogues(const Node& node) {
  std::vector<Epilogue> epilogues = node.epilogue;
  if (node.inputs.size() > 2 && !node.inputs[2].empty()) epilogues.insert(epilogues.begin(), Epilogue{"bias", node.inputs[2]});
  return epilogues;
}

// How many of a blocked convolution's epilogues its kernel applies (the prefix the templates know:
// a bias, a residual add, then ReLU, ReLU6, SiLU or HardSwish), and the workload parameters that
// say so.
struct FusedEpilogues {
  size_t count = 0;
  std::string params;
};

FusedEpilogues fused_epilogues(const std::vector<Epilogue>& epilogues) {
  FusedEpilogues f;
  auto at = [&](const char* op) { return f.count < epilogues.size() && epilogues[f.count].op == op; };
  for (const char* op : {"bias", "add"}) {
    if (!at(op)) continue;
    f.params += std::string(",") + (std::string(op) == "add" ? "residual" : op) + "=1";
    ++f.count;
  }
  if (at("relu")) {
    f.params += ",relu=1";
    ++f.count;
  } else if (at("clip") && epilogues[f.count].lo == 0.f && epilogues[f.count].hi == 6.f) {
    f.params += ",relu6=1";
    ++f.count;
  } else if (at("silu") || at("hardswish")) {
    f.params += fmt::format(",{}=1", epilogues[f.count].op);
    ++f.count;
  }
  return f;
}

StatusOr<Workload> conv_workload(const Graph& graph, const Node& node) {
  TF_ASSIGN_OR_RETURN(const Value* x, graph.value_of(node, node.inputs[0]));
  TF_ASSIGN_OR_RETURN(const Value* w, graph.value_of(node, node.inputs[1]));
  if (x->shape.size() != 4 || w->shape.size() != 4)
    return unsupported(node, fmt::format("only 2-D convolutions are supported (input {}, weight {})",
                                         shape_string(x->shape), shape_string(w->shape)));
  int64_t n = x->shape[0], c = x->shape[1], h = x->shape[2], wd = x->shape[3];
  int64_t k = w->shape[0], r = w->shape[2], s = w->shape[3];
  auto strides = node.ints_attr("strides"), dilations = node.ints_attr("dilations"), pads = node.ints_attr("pads");
  std::string auto_pad = node.attributes.count("auto_pad") ? node.attributes.at("auto_pad").s : "NOTSET";
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    return unsupported(node, fmt::format("auto_pad {} is not supported; export with explicit pads", auto_pad));
  if (strides.empty()) strides = {1, 1};
  if (dilations.empty()) dilations = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
    return unsupported(node, fmt::format("strides {}, dilations {} and pads {} do not describe a 2-D convolution",
                                         shape_string(strides), shape_string(dilations), shape_string(pads)));
  if (strides[0] != strides[1] || dilations[0] != dilations[1] ||
      !std::all_of(pads.begin(), pads.end(), [&](int64_t p) { return p == pads[0]; }))
    return unsupported(node, fmt::format("strides {}, dilations {} and pads {} must be the same in every direction",
                                         shape_string(strides), shape_string(dilations), shape_string(pads)));
  int64_t group = node.int_attr("group", 1);
  // Shape inference does not hold a weight to its input's channels (a hostile file's would be
  // read with the input's count).
  if (group < 1 || w->shape[1] * group != c)
    return unsupported(node, fmt::format("weight {} does not fit input {} in {} group(s)", shape_string(w->shape),
                                         shape_string(x->shape), group));
  // One group's convolution, which the built model calls once per group.
  if (int64_t g = grouped_conv_groups(graph, node); g > 1) {
    c /= g;
    k /= g;
    group = 1;
  }
  std::string params = fmt::format("N={},C={},H={},W={}", n, c, h, wd);
  std::string tail = fmt::format("R={},S={},stride={},pad={}", r, s, strides[0], pads[0]);
  if (dilations[0] != 1) tail += fmt::format(",dilation={}", dilations[0]);
  std::string fused = fused_epilogues(conv_epilogues(node)).params;
  if (group == 1) {
    auto [ic, oc] = conv_blocks(c, k);
    if (ic > 0)
      return make_workload(node, fmt::format("conv2d_nchwc:{},K={},{},ic_block={},oc_block={}{}", params, k, tail, ic, oc, fused));
    return make_workload(node, fmt::format("conv2d_nchw:{},K={},{}", params, k, tail));
  }
  if (group == c && k == c && w->shape[1] == 1) {
    if (int64_t b = channel_block(c); b > 0)
      return make_workload(node, fmt::format("depthwise_conv2d_nchwc:{},{},block={}{}", params, tail, b, fused));
    return make_workload(node, fmt::format("depthwise_conv2d_nchw:{},{}", params, tail));
  }
  return unsupported(node, fmt::format("a grouped convolution with {} groups of {} channels is not supported (only "
                                       "groups of several channels, and depthwise with one filter per channel)",
                                       group, c / std::max<int64_t>(group, 1)));
}

bool has_epilogue(const Node& node, const std::string& op, size_t at) {
  return node.epilogue.size() > at && node.epilogue[at].op == op;
}

// The prefix of a dense layer's epilogues its kernel applies: a bias, a residual add, then ReLU,
// GELU (erf or tanh) or SiLU. `own_bias`: a Gemm's C input is the bias, and the epilogues start after it.
struct DenseEpilogues {
  size_t count = 0;  // Of the node's epilogues, how many the kernel applies.
  bool bias = false, residual = false, relu = false, gelu = false, gelu_tanh = false, silu = false;
};

DenseEpilogues dense_epilogues(const Node& node, bool own_bias) {
  DenseEpilogues d;
  d.bias = own_bias;
  auto at = [&](const char* op) { return has_epilogue(node, op, d.count); };
  if (!own_bias && at("bias")) d.bias = true, ++d.count;
  if (at("add")) d.residual = true, ++d.count;
  if (at("relu")) d.relu = true, ++d.count;
  else if (at("gelu")) d.gelu = true, ++d.count;
  else if (at("gelu_tanh")) d.gelu_tanh = true, ++d.count;
  else if (at("silu")) d.silu = true, ++d.count;
  return d;
}

// A dense layer's workload: its epilogues go into it, and a constant weight arrives packed in the
// column panels of the kernel's register tile (w_block), packed once when the model is built, so
// that the kernel tuned and measured is the one the model runs and packs nothing at run time.
// The panel width is the default tile's on the AVX-512 the farm's boards have (as conv_blocks'
// vectors of 16): tasks are extracted before any board is chosen.
std::string dense_text(int64_t m, int64_t n, int64_t k, const DenseEpilogues& e, bool constant_weight) {
  int64_t w_block = constant_weight ? ops::dense_weight_block(m, n, k, ops::CpuModel{}) : 0;
  return fmt::format("dense:M={},N={},K={}{}{}{}{}{}{}{}", m, n, k, e.bias ? ",bias=1" : "", e.residual ? ",residual=1" : "",
                     e.relu ? ",relu=1" : "", e.gelu ? ",gelu=1" : "", e.gelu_tanh ? ",gelu_tanh=1" : "", e.silu ? ",silu=1" : "",
                     w_block > 0 ? fmt::format(",w_block={}", w_block) : "");
}

StatusOr<Workload> gemm_workload(const Graph& graph, const Node& node) {
  TF_ASSIGN_OR_RETURN(const Value* a, graph.value_of(node, node.inputs[0]));
  TF_ASSIGN_OR_RETURN(const Value* b, graph.value_of(node, node.inputs[1]));
  if (a->shape.size() != 2 || b->shape.size() != 2)
    return unsupported(node, fmt::format("Gemm of {} and {}", shape_string(a->shape), shape_string(b->shape)));
  if (node.int_attr("transA", 0)) return unsupported(node, "transA=1 is not supported");
  if (node.float_attr("alpha", 1.f) != 1.f || node.float_attr("beta", 1.f) != 1.f)
    return unsupported(node, "alpha and beta other than 1 are not supported");
  bool trans_b = node.int_attr("transB", 0);
  int64_t m = a->shape[0], k = a->shape[1], n = trans_b ? b->shape[0] : b->shape[1];
  bool own_bias = node.inputs.size() > 2 && !node.inputs[2].empty();
  if (b->constant || trans_b) return make_workload(node, dense_text(m, n, k, dense_epilogues(node, own_bias), b->constant));
  return make_workload(node, fmt::format("matmul:M={},N={},K={}", m, n, k));
}

StatusOr<Workload> matmul_workload(const Graph& graph, const Node& node) {
  TF_ASSIGN_OR_RETURN(const Value* a, graph.value_of(node, node.inputs[0]));
  TF_ASSIGN_OR_RETURN(const Value* b, graph.value_of(node, node.inputs[1]));
  if (a->shape.size() < 2 || b->shape.size() < 2)
    return unsupported(node, fmt::format("MatMul of {} and {}: vectors are not supported", shape_string(a->shape),
                                         shape_string(b->shape)));
  int64_t m = a->shape[a->shape.size() - 2], k = a->shape.back(), n = b->shape.back();
  int64_t batch_a = a->elements() / (m * k), batch_b = b->elements() / (k * n);
  if (b->shape.size() == 2) {
    // Rows of every batch share the weight: one GEMM of batch x M rows.
    if (b->constant) return make_workload(node, dense_text(batch_a * m, n, k, dense_epilogues(node, false), true));
    return make_workload(node, fmt::format("matmul:M={},N={},K={}", batch_a * m, n, k));
  }
  if (batch_a != batch_b || a->shape.size() != b->shape.size())
    return unsupported(node, fmt::format("a batched MatMul of {} and {} broadcasts its batch; not supported",
                                         shape_string(a->shape), shape_string(b->shape)));
  return make_workload(node, fmt::format("batch_matmul:B={},M={},N={},K={}", batch_a, m, n, k));
}

}  // namespace

int64_t grouped_conv_groups(const Graph& graph, const Node& node) {
  int64_t group = node.int_attr("group", 1);
  if (node.op != "Conv" || group <= 1 || node.inputs.size() < 2) return 1;
  const Value* x = graph.find(node.inputs[0]);
  const Value* w = graph.find(node.inputs[1]);
  if (!x || !w || x->shape.size() != 4 || w->shape.size() != 4 || x->shape[0] != 1) return 1;
  int64_t c = x->shape[1], k = w->shape[0];
  // One input channel per group is a depthwise convolution, which has its own template.
  if (c % group != 0 || k % group != 0 || c / group == 1 || w->shape[1] != c / group) return 1;
  return group;
}

StatusOr<Workload> workload_of(const Graph& graph, const Node& node) {
  if (node.inputs.size() < 2) return unsupported(node, "has fewer than two inputs");
  for (int i = 0; i < 2; ++i) {
    TF_ASSIGN_OR_RETURN(const Value* v, graph.value_of(node, node.inputs[i]));
    for (int64_t d : v->shape)
      if (d <= 0) return unsupported(node, fmt::format("input '{}' has shape {}", v->name, shape_string(v->shape)));
  }
  if (node.op == "Conv") return conv_workload(graph, node);
  if (node.op == "Gemm") return gemm_workload(graph, node);
  if (node.op == "MatMul") return matmul_workload(graph, node);
  return unsupported(node, "is not a tunable operator");
}

std::optional<Workload> winograd_form(const Workload& w) {
  if (w.op != "conv2d_nchwc") return std::nullopt;
  operators::ConvShape c = operators::conv_shape(w);
  if (c.winograd != 0) return std::nullopt;
  int64_t side = std::min(c.P, c.Q);
  // Below 8 the tiles are few and the transformed weights large (see the header); channels
  // fewer than a vector's leave the batched products too short to pay for the transforms.
  if (side < 8 || c.C < 16 || c.K < 16) return std::nullopt;
  // F(4x4) multiplies least; F(2x2)'s 4x4 tiles waste less of a small map, its weights are 16/36
  // of F(4x4)'s and its rounding a tenth. Their defaults beside the direct one (bench/RESULTS.md,
  // sessions 17 and 26): F(4x4) 3.0-3.7x at 20x20 to 56x56, 2.2x at 256@14x14 (F(2x2) 1.8x),
  // 1.85x at 10x10 (F(2x2) 1.90x); at 512 channels F(4x4) 0.93x at 14x14 and 1.31x at 28x28,
  // F(2x2) 1.61x and 2.18x. The operator's own check says which convolutions have the form (3x3,
  // stride 1, no dilation).
  bool f4 = side >= 12 && c.C <= operators::kWinogradF4MaxChannels && c.K <= operators::kWinogradF4MaxChannels;
  auto form = parse_workload(fmt::format("{},winograd={}", w.to_string(), f4 ? 4 : 2));
  if (!form.ok()) return std::nullopt;
  return *form;
}

StatusOr<TunedCall> tuned_call_of(const Graph& graph, const Node& node, const WorkloadForms& forms) {
  TunedCall call;
  TF_ASSIGN_OR_RETURN(call.workload, workload_of(graph, node));
  if (auto form = forms.find(call.workload.to_string()); form != forms.end()) call.workload = form->second;
  std::vector<Epilogue> epilogues = node.epilogue;
  if (operators::is_conv(call.workload)) {
    operators::ConvShape conv = operators::conv_shape(call.workload);
    call.tensors = {node.inputs[0], node.inputs[1]};
    // The NCHW convolution templates compute the sum only: the node's own bias is an epilogue.
    epilogues = conv_epilogues(node);
    if (conv.blocked()) {
      // The input converted and the weight packed to the layouts the kernel takes, named for them
      // ("x/nchw16c", "w/oihw16i16o", "w/chw16c").
      call.input_block = conv.ic;
      call.output_block = conv.oc;
      std::vector<operators::TensorArg> args = operators::tensor_args(call.workload);
      call.tensors[0] = fmt::format("{}/{}", node.inputs[0], lower(args[0].layout));
      call.tensors[1] = fmt::format("{}/{}", node.inputs[1], lower(args[1].layout));
      // The blocked templates apply the prefix their workload names; its operands follow the weight.
      size_t fused = fused_epilogues(epilogues).count;
      for (size_t i = 0; i < fused; ++i) {
        if (epilogues[i].op == "bias") call.tensors.push_back(epilogues[i].operand);
        if (epilogues[i].op == "add") {
          call.residual_index = call.tensors.size();
          call.tensors.push_back(epilogues[i].operand);
        }
      }
      epilogues.erase(epilogues.begin(), epilogues.begin() + static_cast<std::ptrdiff_t>(fused));
    }
  } else if (operators::is_gemm(call.workload) && operators::gemm_shape(call.workload).transpose_b) {
    operators::GemmShape dense = operators::gemm_shape(call.workload);
    bool trans_b = node.op == "Gemm" && node.int_attr("transB", 0);
    call.tensors = {node.inputs[0], node.inputs[1]};
    if (!trans_b || dense.w_block > 0) {
      // Named for the layout ("w/transposed", "w/transposed/nk48n", "w/nk48n"): a weight that one
      // node reads as [K, N] and another as [N, K] gets two copies.
      call.dense_weight = node.inputs[1];
      call.dense_weight_kn = !trans_b;
      call.tensors[1] = node.inputs[1] + (trans_b ? "" : "/transposed");
      if (dense.w_block > 0) call.tensors[1] += "/" + lower(operators::tensor_args(call.workload)[1].layout);
    }
    bool own_bias = node.op == "Gemm" && node.inputs.size() > 2 && !node.inputs[2].empty();
    DenseEpilogues fused = dense_epilogues(node, own_bias);
    if (own_bias) {
      TF_ASSIGN_OR_RETURN(const Value* c, graph.value_of(node, node.inputs[2]));
      if (c->elements() != dense.N)
        return unsupported(node, fmt::format("a C input of shape {} is not a bias", shape_string(c->shape)));
      call.tensors.push_back(node.inputs[2]);
    }
    for (size_t i = 0; i < fused.count; ++i)
      if (!epilogues[i].operand.empty()) call.tensors.push_back(epilogues[i].operand);
    epilogues.erase(epilogues.begin(), epilogues.begin() + static_cast<std::ptrdiff_t>(fused.count));
  } else {
    call.tensors = {node.inputs[0], node.inputs[1]};
  }
  call.remaining = std::move(epilogues);
  bool own_output = call.remaining.empty() && call.output_block == 0;
  call.tensors.push_back(own_output ? node.outputs[0] : node.outputs[0] + "/pre_epilogue");
  if (int64_t g = grouped_conv_groups(graph, node); g > 1) {
    // From one group to the next: its input channels, its filters (in OIHW and packed alike: the
    // blocks divide a group's channels), its bias, and its output channels (a residual's too).
    TF_ASSIGN_OR_RETURN(const Value* x, graph.value_of(node, node.inputs[0]));
    TF_ASSIGN_OR_RETURN(const Value* w, graph.value_of(node, node.inputs[1]));
    TF_ASSIGN_OR_RETURN(const Value* y, graph.value_of(node, node.outputs[0]));
    int64_t bias = w->shape[0] / g, output = y->elements() / g;
    call.groups = g;
    call.group_strides.assign(call.tensors.size(), bias);
    call.group_strides[0] = x->elements() / g;
    // The weight as the kernel takes it: packed, transformed (Winograd's are larger than OIHW).
    call.group_strides[1] = operators::tensor_args(call.workload)[1].num_elements();
    call.group_strides.back() = output;
    if (call.residual_index > 0) call.group_strides[call.residual_index] = output;
  }
  return call;
}

bool streams_its_bytes(const std::string& op) {
  // Measured in built models on AMD EPYC Zen 5 (bench/RESULTS.md, issue 32): squeeze-and-excitation's
  // channel scaling and spatial averages moved 90-200 GB/s, Transposes ~70, Softmax ~35 and
  // LayerNormalization ~25, against a stream figure of ~200 GB/s.
  static const std::set<std::string> kStreaming = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Relu", "LeakyRelu",
                                                   "HardSigmoid", "HardSwish", "Neg", "Abs", "Clip",
                                                   "GlobalAveragePool", "ReduceMean", "AveragePool", "MaxPool",
                                                   "GlobalMaxPool", "Concat", "copy"};
  return kStreaming.count(op) > 0;
}

StatusOr<TaskTable> extract_tasks(Graph& graph) {
  TaskTable table;
  TF_RETURN_IF_ERROR(run_passes(graph));
  // Counted after the passes, which fold nothing tunable away: a grouped convolution counts as
  // the convolution of each group it runs as.
  for (const Node& node : graph.nodes)
    if (is_tunable(node.op)) table.tunable_nodes += static_cast<int>(grouped_conv_groups(graph, node));
  // Nothing is tuned for a model that cannot be built.
  TF_RETURN_IF_ERROR(check_buildable(graph));
  TF_ASSIGN_OR_RETURN(Program program, lower_graph(graph));
  for (const Step& step : program.steps) {
    if (step.workload) continue;
    ++table.other_steps;
    double bytes = 0;
    for (const auto& t : step.compute.args()) {
      double elements = 1;
      for (int64_t d : t.shape()) elements *= static_cast<double>(d);
      bytes += 4 * elements;  // float32
    }
    table.other_bytes += bytes;
    if (streams_its_bytes(step.op)) table.other_streaming_bytes += bytes;
  }
  // The arena holds the intermediates; every other value a step touches is a constant or one of
  // the model's inputs and outputs.
  MemoryPlan plan = plan_memory(program);
  table.run_bytes = static_cast<double>(plan.arena_bytes);
  std::set<std::string> touched;
  for (const Step& step : program.steps)
    for (const std::string& t : step.tensors) touched.insert(program.storage(t));
  for (const std::string& name : touched) {
    const Value* v = program.graph.find(name);
    if (v && !plan.offsets.count(name)) table.run_bytes += 4 * static_cast<double>(std::max<int64_t>(1, v->elements()));
  }
  std::map<std::string, size_t> index;
  for (const Node& node : graph.nodes) {
    if (!is_tunable(node.op)) {
      table.untuned_ops[node.op]++;
      continue;
    }
    TF_ASSIGN_OR_RETURN(Workload w, workload_of(graph, node));
    std::string key = w.to_string();
    auto [it, added] = index.emplace(key, table.tasks.size());
    if (added) {
      Task t;
      t.workload = w;
      t.flops = operators::flops(w);
      table.tasks.push_back(std::move(t));
    }
    Task& t = table.tasks[it->second];
    t.count += static_cast<int>(grouped_conv_groups(graph, node));
    t.nodes.push_back(node.name);
  }
  std::vector<Task> alternatives;
  for (const Task& t : table.tasks)
    if (std::optional<Workload> form = winograd_form(t.workload)) {
      Task a = t;
      a.workload = *form;
      a.alternative_of = t.workload.to_string();
      // Where the build takes Winograd's form, each node's weight is stored transformed, 1.8-4x
      // the direct one: a run touches that (SqueezeNet's 3x3 weights: 2.2 MB direct, 8.8 MB
      // transformed). Counted as if every such node took it.
      double direct = static_cast<double>(operators::tensor_args(t.workload)[1].num_elements());
      double transformed = static_cast<double>(operators::tensor_args(*form)[1].num_elements());
      table.run_bytes += 4 * t.count * std::max(0.0, transformed - direct);
      alternatives.push_back(std::move(a));
    }
  for (const Task& t : table.tasks) table.total_flops += t.count * t.flops;
  table.tasks.insert(table.tasks.end(), alternatives.begin(), alternatives.end());
  for (Task& t : table.tasks) t.share = table.total_flops > 0 ? t.count * t.flops / table.total_flops : 0;
  std::stable_sort(table.tasks.begin(), table.tasks.end(), [](const Task& a, const Task& b) { return a.share > b.share; });
  return table;
}

}  // namespace tunefarm::model
