#include "model/operators.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "model/passes/group_epilogues.h"

namespace tunefarm::model {
namespace {

using ir::Expr;
using ir::Var;

Status unsupported(const Node& node, const std::string& why) {
  return invalid_argument(fmt::format("node '{}' ({}): {}", node.name, node.op, why));
}

// Scalars are one-element tensors: every buffer has at least one dimension.
std::vector<int64_t> dims_of(const Value& v) { return v.shape.empty() ? std::vector<int64_t>{1} : v.shape; }

Expr f32(double v) { return ir::float_imm(v); }

// Reads `t` at the output index `idx` with NumPy broadcasting: dimensions align on the right, and
// a dimension of 1 is read at 0.
Expr broadcast_read(const te::Tensor& t, const std::vector<Var>& idx) {
  const auto& shape = t.shape();
  std::vector<Expr> at;
  for (size_t d = 0; d < shape.size(); ++d) {
    size_t od = idx.size() - shape.size() + d;
    at.push_back(shape[d] == 1 ? ir::int_imm(0) : Expr(idx[od]));
  }
  return t(at);
}

std::vector<Expr> as_exprs(const std::vector<Var>& v) { return {v.begin(), v.end()}; }

Expr gelu(const Expr& x) {
  Expr erf = ir::call(ir::Type::f32(), "erf", {x * f32(1.0 / std::sqrt(2.0))});
  return f32(0.5) * x * (f32(1.0) + erf);
}

// The placeholders of a node's first `count` inputs (all when negative), and their value names.
StatusOr<std::vector<te::Tensor>> inputs_of(const Graph& graph, const Node& node, int count, std::vector<std::string>& names) {
  std::vector<te::Tensor> in;
  for (size_t i = 0; i < node.inputs.size() && (count < 0 || static_cast<int>(i) < count); ++i) {
    if (node.inputs[i].empty()) continue;
    TF_ASSIGN_OR_RETURN(const Value* v, graph.value_of(node, node.inputs[i]));
    if (!v->is_float) return unsupported(node, fmt::format("input '{}' is not float32", v->name));
    in.push_back(te::placeholder(fmt::format("in{}", i), dims_of(*v)));
    names.push_back(v->name);
  }
  return in;
}

// The last axis of a rank-`rank` tensor, which is the only axis Softmax and LayerNormalization
// support here (the form every exporter writes for transformers).
bool is_last_axis(int64_t axis, size_t rank) { return axis == -1 || axis == static_cast<int64_t>(rank) - 1; }

StatusOr<te::Tensor> elementwise(const Node& node, const std::vector<te::Tensor>& in, const std::vector<int64_t>& out) {
  const std::string& op = node.op;
  static const std::map<std::string, ir::BinaryOp> kBinary = {
      {"Add", ir::BinaryOp::kAdd}, {"Sub", ir::BinaryOp::kSub}, {"Mul", ir::BinaryOp::kMul}, {"Div", ir::BinaryOp::kDiv},
      {"Max", ir::BinaryOp::kMax}, {"Min", ir::BinaryOp::kMin}};
  if (auto b = kBinary.find(op); b != kBinary.end()) {
    if (in.size() != 2) return unsupported(node, "expects two inputs");
    return te::compute("out", out, [&](const std::vector<Var>& i) {
      return ir::binary(b->second, broadcast_read(in[0], i), broadcast_read(in[1], i));
    });
  }
  auto unary = [&](const std::function<Expr(Expr)>& f) {
    return te::compute("out", out, [&](const std::vector<Var>& i) { return f(broadcast_read(in[0], i)); });
  };
  if (op == "Relu") return unary([](Expr x) { return ir::max(x, f32(0)); });
  if (op == "Sigmoid") return unary([](Expr x) { return f32(1) / (f32(1) + ir::call(ir::Type::f32(), "exp", {f32(0) - x})); });
  if (op == "Tanh") return unary([](Expr x) { return ir::call(ir::Type::f32(), "tanh", {x}); });
  if (op == "Erf") return unary([](Expr x) { return ir::call(ir::Type::f32(), "erf", {x}); });
  if (op == "Sqrt") return unary([](Expr x) { return ir::call(ir::Type::f32(), "sqrt", {x}); });
  if (op == "Exp") return unary([](Expr x) { return ir::call(ir::Type::f32(), "exp", {x}); });
  if (op == "Neg") return unary([](Expr x) { return f32(0) - x; });
  if (op == "Gelu") return unary(gelu);
  return unsupported(node, "is not an operator a built model can run yet");
}

}  // namespace

bool is_view(const std::string& op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity" || op == "Dropout";
}

StatusOr<Computed> operator_compute(const Graph& graph, const Node& node) {
  if (node.outputs.size() != 1) return unsupported(node, "has more than one output");
  TF_ASSIGN_OR_RETURN(const Value* out_value, graph.value_of(node, node.outputs[0]));
  std::vector<int64_t> out = dims_of(*out_value);
  std::vector<std::string> names;
  // A Clip's bounds are constants that become part of its definition, not tensors it reads.
  TF_ASSIGN_OR_RETURN(std::vector<te::Tensor> in, inputs_of(graph, node, node.op == "Clip" ? 1 : -1, names));
  if (in.empty()) return unsupported(node, "has no input");
  const te::Tensor& x = in[0];
  const std::string& op = node.op;
  te::Tensor result;

  if (op == "Clip") {
    float lo, hi;
    if (!clip_bounds(graph, node, lo, hi)) return unsupported(node, "bounds that are not constants");
    result = te::compute("out", out, [&](const std::vector<Var>& i) { return ir::min(ir::max(x(as_exprs(i)), f32(lo)), f32(hi)); });
  } else if (op == "Softmax") {
    if (!is_last_axis(node.int_attr("axis", -1), out.size())) return unsupported(node, "only the last axis is supported");
    std::vector<int64_t> rows(out.begin(), out.end() - 1);
    auto k = te::reduce_axis(out.back(), "k");
    auto row = [&](const std::vector<Var>& i, Expr last) {
      std::vector<Expr> at(i.begin(), i.begin() + static_cast<std::ptrdiff_t>(rows.size()));
      at.push_back(last);
      return at;
    };
    te::Tensor m = te::compute("row_max", rows, [&](const std::vector<Var>& i) { return te::max_reduce(x(row(i, k->var)), {k}); });
    auto k2 = te::reduce_axis(out.back(), "k2");
    auto shifted_exp = [&](const std::vector<Var>& i, Expr last) {
      std::vector<Expr> r(i.begin(), i.begin() + static_cast<std::ptrdiff_t>(rows.size()));
      return ir::call(ir::Type::f32(), "exp", {x(row(i, last)) - m(r)});
    };
    te::Tensor s = te::compute("row_sum", rows, [&](const std::vector<Var>& i) { return te::sum(shifted_exp(i, k2->var), {k2}); });
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      std::vector<Expr> r(i.begin(), i.end() - 1);
      return shifted_exp(i, i.back()) / s(r);
    });
  } else if (op == "LayerNormalization") {
    if (!is_last_axis(node.int_attr("axis", -1), out.size())) return unsupported(node, "only the last axis is supported");
    float eps = node.float_attr("epsilon", 1e-5f);
    int64_t n = out.back();
    std::vector<int64_t> rows(out.begin(), out.end() - 1);
    auto at = [&](const std::vector<Var>& i, Expr last) {
      std::vector<Expr> a(i.begin(), i.begin() + static_cast<std::ptrdiff_t>(rows.size()));
      a.push_back(last);
      return a;
    };
    // Reductions are whole stages: the sums, then the means read from them.
    auto k = te::reduce_axis(n, "k");
    te::Tensor total = te::compute("total", rows, [&](const std::vector<Var>& i) { return te::sum(x(at(i, k->var)), {k}); });
    auto mean = [&](const std::vector<Expr>& r) { return total(r) / f32(double(n)); };
    auto k2 = te::reduce_axis(n, "k2");
    te::Tensor squares = te::compute("squares", rows, [&](const std::vector<Var>& i) {
      Expr d = x(at(i, k2->var)) - mean(as_exprs(i));
      return te::sum(d * d, {k2});
    });
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      std::vector<Expr> r(i.begin(), i.end() - 1);
      Expr variance = squares(r) / f32(double(n));
      Expr y = (x(as_exprs(i)) - mean(r)) / ir::call(ir::Type::f32(), "sqrt", {variance + f32(eps)});
      if (in.size() > 1) y = y * broadcast_read(in[1], i);
      if (in.size() > 2) y = y + broadcast_read(in[2], i);
      return y;
    });
  } else if (op == "MaxPool" || op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    if (x.shape().size() != 4) return unsupported(node, "only 2-D pooling of NCHW tensors is supported");
    int64_t h = x.shape()[2], w = x.shape()[3];
    if (op == "GlobalAveragePool") {
      auto r = te::reduce_axis(h, "r");
      auto s = te::reduce_axis(w, "s");
      te::Tensor total = te::compute("total", out, [&](const std::vector<Var>& i) {
        return te::sum(x(i[0], i[1], r->var, s->var), {r, s});
      });
      result = te::compute("out", out, [&](const std::vector<Var>& i) { return total(as_exprs(i)) / f32(double(h * w)); });
    } else {
      std::vector<int64_t> kernel = op == "GlobalMaxPool" ? std::vector<int64_t>{h, w} : node.ints_attr("kernel_shape");
      std::vector<int64_t> strides = node.ints_attr("strides"), pads = node.ints_attr("pads"),
                           dilations = node.ints_attr("dilations");
      if (strides.empty()) strides = {1, 1};
      if (pads.empty()) pads = {0, 0, 0, 0};
      if (dilations.empty()) dilations = {1, 1};
      if (kernel.size() != 2 || strides.size() != 2 || pads.size() != 4 || dilations.size() != 2)
        return unsupported(node, "kernel_shape, strides, pads or dilations that do not describe 2-D pooling");
      // The input padded with -inf (padding never wins the max) as a stage of its own, so that
      // the window reads without bounds checks and a vector of outputs reads strided columns.
      int64_t hp = h + pads[0] + pads[2], wp = w + pads[1] + pads[3];
      te::Tensor padded = te::compute("padded", {x.shape()[0], x.shape()[1], hp, wp}, [&](const std::vector<Var>& i) {
        Expr y = i[2] - pads[0], xx = i[3] - pads[1];
        Expr inside = ir::logical_and(ir::logical_and(ir::ge(y, ir::int_imm(0)), ir::lt(y, ir::int_imm(h))),
                                      ir::logical_and(ir::ge(xx, ir::int_imm(0)), ir::lt(xx, ir::int_imm(w))));
        Expr read = x(i[0], i[1], ir::max(ir::min(y, ir::int_imm(h - 1)), ir::int_imm(0)),
                      ir::max(ir::min(xx, ir::int_imm(w - 1)), ir::int_imm(0)));
        return ir::select(inside, read, f32(-std::numeric_limits<float>::infinity()));
      });
      auto r = te::reduce_axis(kernel[0], "r");
      auto s = te::reduce_axis(kernel[1], "s");
      result = te::compute("out", out, [&](const std::vector<Var>& i) {
        return te::max_reduce(padded(i[0], i[1], i[2] * strides[0] + r->var * dilations[0],
                                     i[3] * strides[1] + s->var * dilations[1]), {r, s});
      });
    }
  } else if (op == "Transpose") {
    std::vector<int64_t> perm = node.ints_attr("perm");
    size_t rank = x.shape().size();
    if (perm.empty())
      for (size_t d = 0; d < rank; ++d) perm.push_back(static_cast<int64_t>(rank - 1 - d));
    if (perm.size() != rank) return unsupported(node, "perm does not match the input's rank");
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      std::vector<Expr> at(rank);
      for (size_t d = 0; d < rank; ++d) at[static_cast<size_t>(perm[d])] = i[d];
      return x(at);
    });
  } else if (op == "Concat") {
    int64_t axis = node.int_attr("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(out.size());
    if (axis < 0 || axis >= static_cast<int64_t>(out.size())) return unsupported(node, "axis out of range");
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      Expr value = f32(0);
      int64_t start = 0;
      std::vector<std::pair<Expr, Expr>> parts;
      for (const auto& t : in) {
        std::vector<Expr> at = as_exprs(i);
        int64_t extent = t.shape()[static_cast<size_t>(axis)];
        // Clamped, so that the reads of the inputs a lane does not take stay inside them.
        at[static_cast<size_t>(axis)] = ir::max(ir::min(i[static_cast<size_t>(axis)] - start, ir::int_imm(extent - 1)), ir::int_imm(0));
        parts.push_back({ir::lt(i[static_cast<size_t>(axis)], ir::int_imm(start + extent)), t(at)});
        start += extent;
      }
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) value = it == parts.rbegin() ? it->second : ir::select(it->first, it->second, value);
      return value;
    });
  } else {
    TF_ASSIGN_OR_RETURN(result, elementwise(node, in, out));
  }
  names.push_back(node.outputs[0]);
  return Computed{ops::ComputeDef{in, result}, names};
}

StatusOr<Computed> epilogue_compute(const Graph& graph, const Node& node, const std::string& pre,
                                    const std::vector<Epilogue>& epilogues, int64_t pre_block) {
  TF_ASSIGN_OR_RETURN(const Value* out_value, graph.value_of(node, node.outputs[0]));
  std::vector<int64_t> out = dims_of(*out_value);
  if (pre_block > 0 && (out.size() != 4 || out[1] % pre_block != 0))
    return unsupported(node, fmt::format("output {} is not NCHW in blocks of {}", shape_string(out), pre_block));
  std::vector<int64_t> pre_shape = pre_block > 0 ? std::vector<int64_t>{out[0], out[1] / pre_block, out[2], out[3], pre_block} : out;
  std::vector<te::Tensor> in = {te::placeholder("pre", pre_shape)};
  std::vector<std::string> names = {pre};
  for (const auto& e : epilogues) {
    if (e.operand.empty()) continue;
    TF_ASSIGN_OR_RETURN(const Value* v, graph.value_of(node, e.operand));
    names.push_back(v->name);
    // A bias is one value per channel, however its tensor is shaped ([C], [1, C, 1, 1]).
    in.push_back(te::placeholder(fmt::format("in{}", in.size()), e.op == "bias" ? std::vector<int64_t>{v->elements()} : dims_of(*v)));
  }
  // Channels are dimension 1 of a convolution's NCHW output, the last one of a matrix product's.
  size_t channel = node.op == "Conv" ? 1 : out.size() - 1;
  te::Tensor result = te::compute("out", out, [&](const std::vector<Var>& i) {
    Expr y = pre_block > 0 ? in[0](i[0], i[1] / pre_block, i[2], i[3], i[1] % pre_block) : in[0](as_exprs(i));
    size_t operand = 1;
    for (const auto& e : epilogues) {
      if (e.op == "bias") y = y + in[operand++](i[channel]);
      else if (e.op == "add") y = y + broadcast_read(in[operand++], i);
      else if (e.op == "relu") y = ir::max(y, f32(0));
      else if (e.op == "clip") y = ir::min(ir::max(y, f32(e.lo)), f32(e.hi));
    }
    return y;
  });
  for (const auto& e : epilogues)
    if (e.op != "bias" && e.op != "add" && e.op != "relu" && e.op != "clip")
      return unsupported(node, fmt::format("epilogue '{}' is not supported", e.op));
  names.push_back(node.outputs[0]);
  return Computed{ops::ComputeDef{in, result}, names};
}

Computed to_blocked_compute(const Value& from, const std::string& to, int64_t block) {
  std::vector<int64_t> d = dims_of(from);
  te::Tensor in = te::placeholder("in", d);
  te::Tensor out = te::compute("out", {d[0], d[1] / block, d[2], d[3], block},
                               [&](const std::vector<Var>& i) { return in(i[0], Expr(i[1]) * block + Expr(i[4]), i[2], i[3]); });
  return Computed{ops::ComputeDef{{in}, out}, {from.name, to}};
}

Computed from_blocked_compute(const Value& from, const std::string& to, int64_t block) {
  std::vector<int64_t> d = dims_of(from);
  te::Tensor in = te::placeholder("in", {d[0], d[1] / block, d[2], d[3], block});
  te::Tensor out = te::compute("out", d, [&](const std::vector<Var>& i) {
    return in(i[0], Expr(i[1]) / block, i[2], i[3], Expr(i[1]) % block);
  });
  return Computed{ops::ComputeDef{{in}, out}, {from.name, to}};
}

StatusOr<Computed> blocked_epilogue_compute(const Graph& graph, const Node& node, const std::string& pre,
                                            const std::vector<Epilogue>& epilogues,
                                            const std::vector<std::string>& operands, int64_t block) {
  TF_ASSIGN_OR_RETURN(const Value* out_value, graph.value_of(node, node.outputs[0]));
  std::vector<int64_t> d = dims_of(*out_value);
  if (d.size() != 4 || d[1] % block != 0)
    return unsupported(node, fmt::format("output {} is not NCHW in blocks of {}", shape_string(d), block));
  std::vector<int64_t> shape = {d[0], d[1] / block, d[2], d[3], block};
  std::vector<te::Tensor> in = {te::placeholder("pre", shape)};
  std::vector<std::string> names = {pre};
  size_t next_operand = 0;
  for (const auto& e : epilogues) {
    if (e.op == "bias") {
      TF_ASSIGN_OR_RETURN(const Value* v, graph.value_of(node, e.operand));
      in.push_back(te::placeholder(fmt::format("in{}", in.size()), {v->elements()}));
      names.push_back(v->name);
    } else if (e.op == "add") {
      if (next_operand >= operands.size()) return unsupported(node, "an added tensor has no blocked form");
      in.push_back(te::placeholder(fmt::format("in{}", in.size()), shape));
      names.push_back(operands[next_operand++]);
    } else if (e.op != "relu" && e.op != "clip") {
      return unsupported(node, fmt::format("epilogue '{}' is not supported", e.op));
    }
  }
  te::Tensor result = te::compute("out", shape, [&](const std::vector<Var>& i) {
    Expr y = in[0](as_exprs(i));
    size_t operand = 1;
    for (const auto& e : epilogues) {
      if (e.op == "bias") y = y + in[operand++](Expr(i[1]) * block + Expr(i[4]));
      else if (e.op == "add") y = y + in[operand++](as_exprs(i));
      else if (e.op == "relu") y = ir::max(y, f32(0));
      else if (e.op == "clip") y = ir::min(ir::max(y, f32(e.lo)), f32(e.hi));
    }
    return y;
  });
  names.push_back(node.outputs[0]);
  return Computed{ops::ComputeDef{in, result}, names};
}

StatusOr<Computed> blocked_max_pool_compute(const Graph& graph, const Node& node, const std::string& in, int64_t block) {
  TF_ASSIGN_OR_RETURN(const Value* x_value, graph.value_of(node, node.inputs.at(0)));
  TF_ASSIGN_OR_RETURN(const Value* out_value, graph.value_of(node, node.outputs[0]));
  std::vector<int64_t> xd = dims_of(*x_value), od = dims_of(*out_value);
  std::vector<int64_t> kernel = node.ints_attr("kernel_shape"), strides = node.ints_attr("strides"),
                       pads = node.ints_attr("pads"), dilations = node.ints_attr("dilations");
  if (strides.empty()) strides = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  if (dilations.empty()) dilations = {1, 1};
  if (xd.size() != 4 || xd[1] % block != 0 || kernel.size() != 2 || strides.size() != 2 || pads.size() != 4 ||
      dilations.size() != 2 || node.int_attr("ceil_mode", 0) != 0)
    return unsupported(node, "not a 2-D max pooling of an NCHW tensor in channel blocks");
  int64_t cb = xd[1] / block, h = xd[2], w = xd[3];
  te::Tensor x = te::placeholder("in", {xd[0], cb, h, w, block});
  te::Tensor padded = te::compute("padded", {xd[0], cb, h + pads[0] + pads[2], w + pads[1] + pads[3], block},
                                  [&](const std::vector<Var>& i) {
    Expr y = i[2] - pads[0], xx = i[3] - pads[1];
    Expr inside = ir::logical_and(ir::logical_and(ir::ge(y, ir::int_imm(0)), ir::lt(y, ir::int_imm(h))),
                                  ir::logical_and(ir::ge(xx, ir::int_imm(0)), ir::lt(xx, ir::int_imm(w))));
    Expr read = x(i[0], i[1], ir::max(ir::min(y, ir::int_imm(h - 1)), ir::int_imm(0)),
                  ir::max(ir::min(xx, ir::int_imm(w - 1)), ir::int_imm(0)), i[4]);
    return ir::select(inside, read, f32(-std::numeric_limits<float>::infinity()));
  });
  auto r = te::reduce_axis(kernel[0], "r");
  auto s = te::reduce_axis(kernel[1], "s");
  te::Tensor out = te::compute("out", {od[0], cb, od[2], od[3], block}, [&](const std::vector<Var>& i) {
    return te::max_reduce(padded(i[0], i[1], i[2] * strides[0] + r->var * dilations[0],
                                 i[3] * strides[1] + s->var * dilations[1], i[4]), {r, s});
  });
  return Computed{ops::ComputeDef{{x}, out}, {in, node.outputs[0]}};
}

Computed copy_compute(const Value& from, const std::string& to) {
  te::Tensor in = te::placeholder("in", dims_of(from));
  te::Tensor out = te::compute("out", dims_of(from), [&](const std::vector<Var>& i) { return in(as_exprs(i)); });
  return Computed{ops::ComputeDef{{in}, out}, {from.name, to}};
}

}  // namespace tunefarm::model
