#include "model/operators.h"

#include <algorithm>
#include <numeric>
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "compiler/ops/activations.h"
#include "model/passes/group_epilogues.h"

namespace tunefarm::model {
namespace {

using ir::Expr;
using ir::Var;
using ops::gelu;
using ops::gelu_tanh;
using ops::sigmoid;

Status unsupported(const Node& node, const std::string& why) {
  return invalid_argument(fmt::format("node '{}' ({}): {}", node.name, node.op, why));
}

// Scalars are one-element tensors: every buffer has at least one dimension.
std::vector<int64_t> dims_of(const Value& v) { return v.shape.empty() ? std::vector<int64_t>{1} : v.shape; }

Expr f32(double v) { return ir::float_imm(v); }

// Pooling's read of an h x w map at row y, column xx: `outside` beyond it (-inf for the max, which
// padding never wins; 0 for a sum), the coordinates clamped so that the load itself stays in
// bounds; `at` reads the map.
Expr pool_read(Expr y, Expr xx, int64_t h, int64_t w, const std::function<Expr(Expr, Expr)>& at,
               double outside = -std::numeric_limits<float>::infinity()) {
  Expr inside = ir::logical_and(ir::logical_and(ir::ge(y, ir::int_imm(0)), ir::lt(y, ir::int_imm(h))),
                                ir::logical_and(ir::ge(xx, ir::int_imm(0)), ir::lt(xx, ir::int_imm(w))));
  Expr read = at(ir::max(ir::min(y, ir::int_imm(h - 1)), ir::int_imm(0)), ir::max(ir::min(xx, ir::int_imm(w - 1)), ir::int_imm(0)));
  return ir::select(inside, read, f32(outside));
}

// How many of a pooling window's elements along one axis an average counts: the window from
// at * stride - pad_begin, k long, inside the input (or, with `include_pad`, inside the input and its
// padding; never what ceil_mode reaches past that).
Expr window_count(Expr at, int64_t stride, int64_t k, int64_t pad_begin, int64_t size, int64_t pad_end, bool include_pad) {
  Expr first = at * stride - pad_begin;
  int64_t lo = include_pad ? -pad_begin : 0, hi = include_pad ? size + pad_end : size;
  return ir::min(first + k, ir::int_imm(hi)) - ir::max(first, ir::int_imm(lo));
}

// Reads `t` at the output index `idx` with NumPy broadcasting: dimensions align on the right, and
// a dimension of 1 is read at 0.
Expr broadcast_read(const te::Tensor& t, const std::vector<Expr>& idx) {
  const auto& shape = t.shape();
  std::vector<Expr> at;
  for (size_t d = 0; d < shape.size(); ++d) {
    size_t od = idx.size() - shape.size() + d;
    at.push_back(shape[d] == 1 ? ir::int_imm(0) : idx[od]);
  }
  return t(at);
}

std::vector<Expr> as_exprs(const std::vector<Var>& v) { return {v.begin(), v.end()}; }

Expr broadcast_read(const te::Tensor& t, const std::vector<Var>& idx) { return broadcast_read(t, as_exprs(idx)); }

// Mish, x tanh(softplus(x)), through exp only (which vectorizes): with n = (1 + e^x)^2,
// tanh(log(1 + e^x)) = (n - 1) / (n + 1); past x = 20 that is 1 in float32, where n overflows.
Expr mish(const Expr& x) {
  Expr e = f32(1) + ir::call(ir::Type::f32(), "exp", {ir::min(x, f32(20))});
  Expr n = e * e;
  return ir::select(ir::lt(x, f32(20)), x * (n - f32(1)) / (n + f32(1)), x);
}

Expr hard_sigmoid(const Expr& x, float alpha, float beta) {
  return ir::min(ir::max(f32(alpha) * x + f32(beta), f32(0)), f32(1));
}

// The epilogues that are activations (group_epilogues folds them), applied to `y`.
bool is_activation(const std::string& op) {
  return op == "relu" || op == "clip" || op == "silu" || op == "hardswish" || op == "gelu" || op == "gelu_tanh";
}

Expr activation(const Epilogue& e, const Expr& y) {
  if (e.op == "relu") return ir::max(y, f32(0));
  if (e.op == "clip") return ir::min(ir::max(y, f32(e.lo)), f32(e.hi));
  if (e.op == "silu") return y * sigmoid(y);
  if (e.op == "gelu") return gelu(y);
  if (e.op == "gelu_tanh") return gelu_tanh(y);
  return y * hard_sigmoid(y, 1.f / 6, 0.5f);
}

// The constant integers of input `i` of `node` (axes, starts, indices), or false.
bool constant_ints(const Graph& graph, const Node& node, size_t i, std::vector<int64_t>& out) {
  if (i >= node.inputs.size() || node.inputs[i].empty()) return false;
  const Value* v = graph.find(node.inputs[i]);
  if (!v || !v->constant || v->is_float) return false;
  out = v->ints;
  return true;
}

// An axis in 0..rank-1 from ONNX's -rank..rank-1; -1 when out of range.
int64_t normalize_axis(int64_t axis, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < 0) axis += r;
  return axis >= 0 && axis < r ? axis : -1;
}

// The placeholders of a node's first `count` inputs (all when negative), and their value names.
StatusOr<std::vector<te::Tensor>> inputs_of(const Graph& graph, const Node& node, int count, std::vector<std::string>& names) {
  std::vector<te::Tensor> in;
  for (size_t i = 0; i < node.inputs.size() && (count < 0 || static_cast<int>(i) < count); ++i) {
    if (node.inputs[i].empty()) continue;
    TF_ASSIGN_OR_RETURN(const Value* v, graph.value_of(node, node.inputs[i]));
    // Integer constants (a mask, an index) are stored as float32 with the weights, and integers
    // computed at run time (from token ids, a mask: see input_cast_compute) are held as float32.
    in.push_back(te::placeholder(fmt::format("in{}", i), dims_of(*v)));
    names.push_back(v->name);
  }
  return in;
}

// A 4-D NCHW shape in NCHW[block]c.
std::vector<int64_t> blocked_shape(const std::vector<int64_t>& d, int64_t block) {
  return {d[0], d[1] / block, d[2], d[3], block};
}

// The last axis of a rank-`rank` tensor, which is the only axis Softmax and LayerNormalization
// support here (the form every exporter writes for transformers).
bool is_last_axis(int64_t axis, size_t rank) { return axis == -1 || axis == static_cast<int64_t>(rank) - 1; }

// The row of an index into a [rows..., n] tensor (all but its last), and a row's index at `k`.
std::vector<Expr> row_of(const std::vector<Var>& i) { return {i.begin(), i.end() - 1}; }
std::vector<Expr> with_last(std::vector<Expr> row, Expr k) {
  row.push_back(std::move(k));
  return row;
}

// A statistic of each row (the sum or the max of `term(row, k)` over k < n), in stages that
// vectorize across the row (plain_schedule runs a stage's short last axis as vectors inside its
// reduction): partial results in `lanes` x `chains` columns (powers of two), column c over every
// (lanes x chains)-th term from c, so that each of the `chains` vectors is an accumulator of its
// own (one chain of dependent additions along the row waited on each addition's latency); then the
// chains summed into `lanes` columns, then those. A row that is not a multiple of the columns
// (ViT's 197 tokens) ends in a block that reads the row's last `width` terms, the ones the whole
// blocks did not cover taken and the rest replaced by the identity: its reads stay dense and inside
// the row (a block past the row's end read min(k, n - 1), which the vectorizer can only gather:
// 16 gathered lanes per vector of every block, 15x a copy of the row's bytes).
te::Tensor row_statistic(const std::string& name, const std::vector<int64_t>& rows, int64_t n, bool max,
                         const std::function<Expr(const std::vector<Expr>&, Expr)>& term) {
  int64_t lanes = 1;
  while (lanes * 2 <= std::min<int64_t>(16, n)) lanes *= 2;
  // Four chains where the row has at least two steps of them (Zen 4 and Skylake add vectors with a
  // latency of 3-4 cycles at two a cycle); fewer on short rows, whose tail would be mostly identity.
  int64_t chains = 1;
  while (chains < 4 && lanes * chains * 4 <= n) chains *= 2;
  int64_t width = lanes * chains;  // At most n: lanes <= n, and chains > 1 only where 4 x lanes x chains <= n.
  int64_t whole = n / width, rest = n % width;
  auto reduce = [&](Expr v, const te::IterVar& axis) { return max ? te::max_reduce(v, {axis}) : te::sum(v, {axis}); };
  auto combine = [&](const Expr& a, const Expr& b) { return max ? ir::max(a, b) : a + b; };
  Expr identity = f32(max ? -std::numeric_limits<float>::infinity() : 0.0);
  auto ko = te::reduce_axis(whole, name + "_k");
  std::vector<int64_t> shape = rows;
  shape.push_back(width);
  te::Tensor partial = te::compute(name + "_chains", shape, [&](const std::vector<Var>& i) {
    return reduce(term(row_of(i), Expr(ko->var) * width + Expr(i.back())), ko);
  });
  // Column c of the last block: term n - width + c, where that is past the whole blocks.
  auto last_block = [&](const std::vector<Expr>& r, Expr c) {
    return ir::select(ir::ge(c, ir::int_imm(width - rest)), term(r, c + ir::int_imm(n - width)), identity);
  };
  shape.back() = lanes;
  te::Tensor columns = chains == 1 && rest == 0 ? partial : te::compute(name + "_lanes", shape, [&](const std::vector<Var>& i) {
    std::vector<Expr> r = row_of(i);
    Expr v = partial(with_last(r, Expr(i.back())));
    for (int64_t c = 1; c < chains; ++c) v = combine(v, partial(with_last(r, Expr(i.back()) + ir::int_imm(c * lanes))));
    if (rest == 0) return v;
    for (int64_t c = 0; c < chains; ++c) v = combine(v, last_block(r, Expr(i.back()) + ir::int_imm(c * lanes)));
    return v;
  });
  // The columns combined pairwise, a tree of depth log2(lanes) where a reduction over them would
  // be a chain of `lanes` dependent additions (floating-point sums are not reassociated): each
  // level a stage of half the columns, one vector operation on halves (as scalars, the levels took
  // ~35 instructions a statistic, a tenth of a softmax row's).
  te::Tensor level = columns;
  for (int64_t half = lanes / 2; half >= 1; half /= 2) {
    shape.back() = half;
    te::Tensor wider = level;
    level = te::compute(fmt::format("{}_{}", name, half), shape, [&](const std::vector<Var>& i) {
      std::vector<Expr> r = row_of(i);
      return combine(wider(with_last(r, Expr(i.back()))), wider(with_last(r, Expr(i.back()) + ir::int_imm(half))));
    });
  }
  return te::compute(name, rows, [&](const std::vector<Var>& i) { return level(with_last(as_exprs(i), ir::int_imm(0))); });
}

// 1 where `c` holds, else 0: a comparison's or a logical operator's boolean, held as float32.
Expr as_float(const Expr& c) { return ir::select(c, f32(1), f32(0)); }

Expr is_true(const Expr& x) { return ir::compare(ir::CompareOp::kNE, x, f32(0)); }

// floor(v) and ceil(v) of a float32 from its truncation toward zero.
Expr floor_of(const Expr& v) {
  Expr t = ir::cast(ir::Type::i64(), v);
  return ir::select(ir::lt(v, ir::cast(ir::Type::f32(), t)), t - 1, t);
}
Expr ceil_of(const Expr& v) {
  Expr t = ir::cast(ir::Type::i64(), v);
  return ir::select(ir::lt(ir::cast(ir::Type::f32(), t), v), t + 1, t);
}

// Floor, Ceil and Round as float32: `rounded` (from the integer part) where |x| < 2^23; a float32
// of 2^23 or more is an integer already (and past int64's range the truncation is not defined),
// and a NaN stays NaN.
Expr integral(const Expr& x, const Expr& rounded) { return ir::select(ir::lt(ir::max(x, f32(0) - x), f32(8388608.0)), rounded, x); }

// `x` read for output position `i` of a reduction over the axes `reduced` marks: those axes at
// `over` (in order), the others at i's positions; `keep`: the output keeps the reduced axes as 1s
// (keepdims), whose positions in i are skipped. Reductions, ArgMax, global pooling.
Expr read_reduced(const te::Tensor& x, const std::vector<bool>& reduced, bool keep, const std::vector<Var>& i,
                  const std::vector<Expr>& over) {
  std::vector<Expr> at;
  size_t next = 0, r = 0;
  for (size_t d = 0; d < reduced.size(); ++d) {
    if (reduced[d]) {
      at.push_back(over[r++]);
      if (keep) ++next;
    } else {
      at.push_back(i[next++]);
    }
  }
  return x(at);
}

std::vector<Expr> vars_of(const std::vector<te::IterVar>& axes) {
  std::vector<Expr> v;
  for (const auto& a : axes) v.push_back(a->var);
  return v;
}

// Inputs read with broadcasting (broadcast_read) must broadcast to the output: each of their axes,
// aligned on the right, 1 or the output's. Shape inference checks it for most operators, not for
// PRelu's slope nor a normalization's scale and bias (ONNX Runtime refuses those when it runs).
Status check_broadcasts(const Node& node, const std::vector<te::Tensor>& in, const std::vector<int64_t>& out) {
  for (const te::Tensor& t : in) {
    const auto& d = t.shape();
    bool fits = d.size() <= out.size();
    for (size_t k = 0; fits && k < d.size(); ++k) fits = d[k] == 1 || d[k] == out[out.size() - d.size() + k];
    if (!fits) return unsupported(node, fmt::format("input {} does not broadcast to its output {}", shape_string(d), shape_string(out)));
  }
  return Status();
}

StatusOr<te::Tensor> elementwise(const Node& node, const std::vector<te::Tensor>& in, const std::vector<int64_t>& out,
                                 bool integer_out) {
  const std::string& op = node.op;
  TF_RETURN_IF_ERROR(check_broadcasts(node, in, out));
  // Integer division truncates, which float32 does not; the exporters' integer divisions are of
  // shapes, folded before.
  if ((op == "Div" || op == "Mod") && integer_out) return unsupported(node, "integer division at run time is not supported");
  static const std::map<std::string, ir::CompareOp> kCompare = {
      {"Equal", ir::CompareOp::kEQ}, {"Less", ir::CompareOp::kLT}, {"LessOrEqual", ir::CompareOp::kLE},
      {"Greater", ir::CompareOp::kGT}, {"GreaterOrEqual", ir::CompareOp::kGE}};
  if (auto c = kCompare.find(op); c != kCompare.end()) {
    if (in.size() != 2) return unsupported(node, "expects two inputs");
    return te::compute("out", out, [&](const std::vector<Var>& i) {
      return as_float(ir::compare(c->second, broadcast_read(in[0], i), broadcast_read(in[1], i)));
    });
  }
  if (op == "And" || op == "Or") {
    if (in.size() != 2) return unsupported(node, "expects two inputs");
    return te::compute("out", out, [&](const std::vector<Var>& i) {
      Expr a = as_float(is_true(broadcast_read(in[0], i))), b = as_float(is_true(broadcast_read(in[1], i)));
      return op == "And" ? ir::min(a, b) : ir::max(a, b);
    });
  }
  // Sum, Mean, Max and Min of any number of inputs (broadcasting), from opset 8.
  if (op == "Sum" || op == "Mean" || op == "Max" || op == "Min") {
    if (in.empty()) return unsupported(node, "has no input");
    return te::compute("out", out, [&](const std::vector<Var>& i) {
      Expr v = broadcast_read(in[0], i);
      for (size_t k = 1; k < in.size(); ++k) {
        Expr next = broadcast_read(in[k], i);
        v = op == "Max" ? ir::max(v, next) : op == "Min" ? ir::min(v, next) : v + next;
      }
      return op == "Mean" ? v * f32(1.0 / double(in.size())) : v;
    });
  }
  static const std::map<std::string, ir::BinaryOp> kBinary = {
      {"Add", ir::BinaryOp::kAdd}, {"Sub", ir::BinaryOp::kSub}, {"Mul", ir::BinaryOp::kMul}, {"Div", ir::BinaryOp::kDiv}};
  if (auto b = kBinary.find(op); b != kBinary.end()) {
    if (in.size() != 2) return unsupported(node, "expects two inputs");
    return te::compute("out", out, [&](const std::vector<Var>& i) {
      return ir::binary(b->second, broadcast_read(in[0], i), broadcast_read(in[1], i));
    });
  }
  if (op == "PRelu") {
    if (in.size() != 2) return unsupported(node, "expects two inputs");
    return te::compute("out", out, [&](const std::vector<Var>& i) {
      Expr x = broadcast_read(in[0], i);
      return ir::select(ir::lt(x, f32(0)), broadcast_read(in[1], i) * x, x);
    });
  }
  auto unary = [&](const std::function<Expr(Expr)>& f) {
    return te::compute("out", out, [&](const std::vector<Var>& i) { return f(broadcast_read(in[0], i)); });
  };
  // alpha (e^x - 1) below zero (ELU; SELU scales it), through the vectorized exponential.
  auto elu = [](Expr x, float alpha) {
    return ir::select(ir::lt(x, f32(0)), f32(alpha) * (ir::call(ir::Type::f32(), "exp", {x}) - f32(1)), x);
  };
  if (op == "Elu") {
    float alpha = node.float_attr("alpha", 1.f);
    return unary([&](Expr x) { return elu(x, alpha); });
  }
  if (op == "Selu") {
    float alpha = node.float_attr("alpha", 1.67326319217681884765625f), gamma = node.float_attr("gamma", 1.05070102214813232421875f);
    return unary([&](Expr x) { return f32(gamma) * elu(x, alpha); });
  }
  if (op == "Relu") return unary([](Expr x) { return ir::max(x, f32(0)); });
  if (op == "Sigmoid") return unary(sigmoid);
  if (op == "Mish") return unary(mish);
  if (op == "HardSigmoid") {
    float alpha = node.float_attr("alpha", 0.2f), beta = node.float_attr("beta", 0.5f);
    return unary([&](Expr x) { return hard_sigmoid(x, alpha, beta); });
  }
  if (op == "HardSwish") return unary([](Expr x) { return x * hard_sigmoid(x, 1.f / 6, 0.5f); });
  if (op == "Swish") {
    float alpha = node.float_attr("alpha", 1.f);
    return unary([&](Expr x) { return x * sigmoid(f32(alpha) * x); });
  }
  if (op == "LeakyRelu") {
    float alpha = node.float_attr("alpha", 0.01f);
    return unary([&](Expr x) { return ir::select(ir::lt(x, f32(0)), f32(alpha) * x, x); });
  }
  if (op == "Abs") return unary([](Expr x) { return ir::max(x, f32(0) - x); });
  if (op == "Reciprocal") return unary([](Expr x) { return f32(1) / x; });
  // A value is NaN where it differs from itself.
  if (op == "IsNaN") return unary([](Expr x) { return as_float(ir::compare(ir::CompareOp::kNE, x, x)); });
  if (op == "Not") return unary([](Expr x) { return as_float(ir::compare(ir::CompareOp::kEQ, x, f32(0))); });
  if (op == "Cast") {
    // Every value is held as float32: a Cast to float copies, one to an integer truncates, one to
    // bool says whether the value is not zero. (Integer constants are folded before.)
    int64_t to = node.int_attr("to", 0);
    if (to == 1) return unary([](Expr x) { return x; });
    if (to == 9) return unary([](Expr x) { return as_float(is_true(x)); });
    if (to == 6 || to == 7) return unary([](Expr x) { return ir::cast(ir::Type::f32(), ir::cast(ir::Type::i64(), x)); });
    return unsupported(node, fmt::format("a Cast to ONNX type {} is not supported", to));
  }
  if (op == "Expand") return unary([](Expr x) { return x; });
  if (op == "Where") {
    if (in.size() != 3) return unsupported(node, "expects three inputs");
    return te::compute("out", out, [&](const std::vector<Var>& i) {
      return ir::select(is_true(broadcast_read(in[0], i)), broadcast_read(in[1], i), broadcast_read(in[2], i));
    });
  }
  if (op == "Tanh") return unary([](Expr x) { return ir::call(ir::Type::f32(), "tanh", {x}); });
  if (op == "Erf") return unary([](Expr x) { return ir::call(ir::Type::f32(), "erf", {x}); });
  if (op == "Sqrt") return unary([](Expr x) { return ir::call(ir::Type::f32(), "sqrt", {x}); });
  if (op == "Exp") return unary([](Expr x) { return ir::call(ir::Type::f32(), "exp", {x}); });
  if (op == "Log") return unary([](Expr x) { return ir::call(ir::Type::f32(), "log", {x}); });
  if (op == "Sin") return unary([](Expr x) { return ir::call(ir::Type::f32(), "sin", {x}); });
  if (op == "Cos") return unary([](Expr x) { return ir::call(ir::Type::f32(), "cos", {x}); });
  // ln(1 + e^x) as max(x, 0) + ln(1 + u), u = e^-|x|: no overflow for large x, and for u below
  // 1e-4 ln(1 + u) as u (1 - u/2), which keeps the tiny values far below zero (1 + u rounds to 1).
  if (op == "Softplus") {
    return unary([](Expr x) {
      Expr u = ir::call(ir::Type::f32(), "exp", {f32(0) - ir::max(x, f32(0) - x)});
      Expr log1p = ir::select(ir::lt(u, f32(1e-4)), u * (f32(1) - f32(0.5) * u), ir::call(ir::Type::f32(), "log", {f32(1) + u}));
      return ir::max(x, f32(0)) + log1p;
    });
  }
  if (op == "Celu") {
    float alpha = node.float_attr("alpha", 1.f);
    if (alpha == 0.f) return unsupported(node, "alpha 0 divides by zero");
    return unary([&](Expr x) {
      Expr e = f32(alpha) * (ir::call(ir::Type::f32(), "exp", {x * f32(1.f / alpha)}) - f32(1));
      return ir::max(x, f32(0)) + ir::min(e, f32(0));
    });
  }
  if (op == "Shrink") {
    float lambd = node.float_attr("lambd", 0.5f), bias = node.float_attr("bias", 0.f);
    return unary([&](Expr x) {
      return ir::select(ir::lt(x, f32(-lambd)), x + f32(bias), ir::select(ir::lt(f32(lambd), x), x - f32(bias), f32(0)));
    });
  }
  if (op == "Softsign") return unary([](Expr x) { return x / (f32(1) + ir::max(x, f32(0) - x)); });
  if (op == "ThresholdedRelu") {
    float alpha = node.float_attr("alpha", 1.f);
    return unary([&](Expr x) { return ir::select(ir::lt(f32(alpha), x), x, f32(0)); });
  }
  if (op == "Neg") return unary([](Expr x) { return f32(0) - x; });
  if (op == "Floor") return unary([](Expr x) { return integral(x, ir::cast(ir::Type::f32(), floor_of(x))); });
  if (op == "Ceil") return unary([](Expr x) { return integral(x, ir::cast(ir::Type::f32(), ceil_of(x))); });
  if (op == "Round") {
    // Halves to the even neighbour, as ONNX's Round.
    return unary([](Expr x) {
      Expr f = ir::cast(ir::Type::f32(), floor_of(x)), d = x - f;
      Expr even = ir::compare(ir::CompareOp::kEQ, f - f32(2) * ir::cast(ir::Type::f32(), floor_of(f * f32(0.5))), f32(0));
      Expr half = ir::select(even, f, f + f32(1));
      return integral(x, ir::select(ir::lt(d, f32(0.5)), f, ir::select(ir::lt(f32(0.5), d), f + f32(1), half)));
    });
  }
  if (op == "Sign") return unary([](Expr x) { return ir::select(ir::lt(f32(0), x), f32(1), ir::select(ir::lt(x, f32(0)), f32(-1), x)); });
  if (op == "Gelu") {
    std::string approximate = node.attributes.count("approximate") ? node.attributes.at("approximate").s : "none";
    if (approximate == "tanh") return unary(gelu_tanh);
    if (approximate != "none") return unsupported(node, fmt::format("approximate '{}' is not supported", approximate));
    return unary(gelu);
  }
  return unsupported(node, "is not an operator a built model can run yet");
}

// A 2-D ConvTranspose computed directly (the ones whose windows overlap: DCGAN's 4x4 at stride 2;
// passes/decompose.h makes the others a GEMM): each output pixel sums the input pixels whose
// window covers it, y = x * stride - pad_begin + r * dilation. One group; the output's size from
// shape inference (output_padding included).
StatusOr<te::Tensor> conv_transpose(const Node& node, const std::vector<te::Tensor>& in, const std::vector<int64_t>& out) {
  if (in.size() < 2 || in[0].shape().size() != 4 || in[1].shape().size() != 4 || out.size() != 4)
    return unsupported(node, "only 2-D ConvTranspose of NCHW tensors is supported");
  if (node.int_attr("group", 1) != 1) return unsupported(node, "grouped ConvTranspose is not supported");
  if (node.attributes.count("auto_pad") && node.attributes.at("auto_pad").s != "NOTSET")
    return unsupported(node, "auto_pad is not supported (the exporters write pads)");
  const te::Tensor &x = in[0], &w = in[1];
  int64_t c = x.shape()[1], h = x.shape()[2], wd = x.shape()[3];
  if (w.shape()[0] != c || w.shape()[1] != out[1]) return unsupported(node, "its weight does not match its input and output");
  std::vector<int64_t> strides = node.ints_attr("strides"), pads = node.ints_attr("pads"), dilations = node.ints_attr("dilations");
  if (strides.empty()) strides = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  if (dilations.empty()) dilations = {1, 1};
  if (strides.size() != 2 || pads.size() != 4 || dilations.size() != 2 || strides[0] < 1 || strides[1] < 1)
    return unsupported(node, "strides, pads or dilations that do not describe a 2-D ConvTranspose");
  auto ci = te::reduce_axis(c, "c");
  auto r = te::reduce_axis(w.shape()[2], "r");
  auto s = te::reduce_axis(w.shape()[3], "s");
  te::Tensor sum = te::compute("sum", out, [&](const std::vector<Var>& i) {
    // The input row (column) whose window puts tap r (s) on output row i[2] (column i[3]), when
    // there is one: the offset is a whole number of strides, inside the input.
    auto source = [&](Expr at, Expr tap, size_t d, int64_t size, Expr& valid) {
      Expr offset = at + pads[d] - tap * dilations[d];
      Expr nonneg = ir::max(offset, ir::int_imm(0));
      valid = ir::logical_and(valid, ir::logical_and(ir::ge(offset, ir::int_imm(0)),
                                                     ir::logical_and(ir::compare(ir::CompareOp::kEQ, nonneg % strides[d], ir::int_imm(0)),
                                                                     ir::lt(nonneg / strides[d], ir::int_imm(size)))));
      return ir::min(nonneg / strides[d], ir::int_imm(size - 1));
    };
    Expr valid = ir::bool_imm(true);
    Expr y = source(i[2], r->var, 0, h, valid), xx = source(i[3], s->var, 1, wd, valid);
    return te::sum(ir::select(valid, x(i[0], ci->var, y, xx) * w(ci->var, i[1], r->var, s->var), f32(0)), {ci, r, s});
  });
  if (in.size() < 3) return sum;
  if (in[2].shape() != std::vector<int64_t>{out[1]}) return unsupported(node, "its bias must have one value per output channel");
  return te::compute("out", out, [&](const std::vector<Var>& i) { return sum(as_exprs(i)) + in[2](i[1]); });
}

// `in` one after the other along `axis` (the output `out`).
te::Tensor concat(const std::vector<te::Tensor>& in, const std::vector<int64_t>& out, size_t axis) {
  return te::compute("out", out, [&](const std::vector<Var>& i) {
    Expr value = f32(0);
    int64_t start = 0;
    std::vector<std::pair<Expr, Expr>> parts;
    for (const auto& t : in) {
      std::vector<Expr> at = as_exprs(i);
      int64_t extent = t.shape()[axis];
      // Clamped, so that the reads of the inputs a lane does not take stay inside them.
      at[axis] = ir::max(ir::min(i[axis] - start, ir::int_imm(extent - 1)), ir::int_imm(0));
      parts.push_back({ir::lt(i[axis], ir::int_imm(start + extent)), t(at)});
      start += extent;
    }
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) value = it == parts.rbegin() ? it->second : ir::select(it->first, it->second, value);
    return value;
  });
}

// The running sums of `x` along `axis` (CumSum: OPT's and Bloom's positions from the attention
// mask), in two levels so that a row of n costs about n x (block + 1) + (n / block)^2 additions
// rather than n^2: the sums of blocks of `block` values, each block's exclusive prefix of those,
// then each value's prefix inside its block added to it. `exclusive` leaves the value itself out,
// `reverse` sums from the end.
te::Tensor cumulative_sum(const te::Tensor& x, size_t axis, bool exclusive, bool reverse) {
  const std::vector<int64_t>& shape = x.shape();
  int64_t n = shape[axis];
  int64_t block = 1;
  while (block * block < n) block *= 2;
  int64_t blocks = (n + block - 1) / block;
  // x along the axis, from the end where `reverse`; position k in [0, n).
  auto read = [&](std::vector<Expr> at, Expr k) {
    at[axis] = reverse ? ir::int_imm(n - 1) - k : k;
    return x(at);
  };
  std::vector<int64_t> block_shape = shape;
  block_shape[axis] = blocks;
  auto t = te::reduce_axis(block, "t");
  te::Tensor sums = te::compute("block_sums", block_shape, [&](const std::vector<Var>& i) {
    Expr k = Expr(i[axis]) * block + Expr(t->var);
    return te::sum(ir::select(ir::lt(k, ir::int_imm(n)), read(as_exprs(i), ir::min(k, ir::int_imm(n - 1))), f32(0)), {t});
  });
  auto j = te::reduce_axis(blocks, "j");
  te::Tensor before = te::compute("blocks_before", block_shape, [&](const std::vector<Var>& i) {
    std::vector<Expr> at = as_exprs(i);
    at[axis] = Expr(j->var);
    return te::sum(ir::select(ir::lt(Expr(j->var), Expr(i[axis])), sums(at), f32(0)), {j});
  });
  auto u = te::reduce_axis(block, "u");
  te::Tensor within = te::compute("within_block", shape, [&](const std::vector<Var>& i) {
    Expr pos = reverse ? ir::int_imm(n - 1) - Expr(i[axis]) : Expr(i[axis]);
    Expr start = pos / block * block, at_k = start + Expr(u->var);
    Expr taken = exclusive ? ir::lt(at_k, pos) : ir::ge(pos, at_k);
    return te::sum(ir::select(taken, read(as_exprs(i), ir::min(at_k, ir::int_imm(n - 1))), f32(0)), {u});
  });
  return te::compute("out", shape, [&](const std::vector<Var>& i) {
    std::vector<Expr> at = as_exprs(i);
    Expr pos = reverse ? ir::int_imm(n - 1) - Expr(i[axis]) : Expr(i[axis]);
    at[axis] = pos / block;
    return before(at) + within(as_exprs(i));
  });
}

// Average pooling over a 2-D NCHW window: the padding zeros, the sum divided by the window's
// elements inside the input (count_include_pad 0, the default) or inside the padded input (1);
// with ceil_mode the last windows reach past the padding, which never counts.
StatusOr<te::Tensor> average_pool(const Node& node, const te::Tensor& x, const std::vector<int64_t>& out) {
  if (x.shape().size() != 4 || out.size() != 4) return unsupported(node, "only 2-D pooling of NCHW tensors is supported");
  int64_t h = x.shape()[2], w = x.shape()[3];
  std::vector<int64_t> kernel = node.ints_attr("kernel_shape"), strides = node.ints_attr("strides"), pads = node.ints_attr("pads"),
                       dilations = node.ints_attr("dilations");
  if (strides.empty()) strides = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  if (!dilations.empty() && dilations != std::vector<int64_t>{1, 1}) return unsupported(node, "dilated average pooling is not supported");
  if (kernel.size() != 2 || strides.size() != 2 || pads.size() != 4)
    return unsupported(node, "kernel_shape, strides or pads that do not describe 2-D pooling");
  if (node.attributes.count("auto_pad") && node.attributes.at("auto_pad").s != "NOTSET")
    return unsupported(node, "auto_pad is not supported (the exporters write pads)");
  bool include_pad = node.int_attr("count_include_pad", 0) != 0;
  int64_t hp = std::max(h + pads[0] + pads[2], (out[2] - 1) * strides[0] + kernel[0]);
  int64_t wp = std::max(w + pads[1] + pads[3], (out[3] - 1) * strides[1] + kernel[1]);
  te::Tensor padded = te::compute("padded", {x.shape()[0], x.shape()[1], hp, wp}, [&](const std::vector<Var>& i) {
    return pool_read(i[2] - pads[0], i[3] - pads[1], h, w, [&](Expr y, Expr xx) { return x(i[0], i[1], y, xx); }, 0.0);
  });
  auto r = te::reduce_axis(kernel[0], "r");
  auto s = te::reduce_axis(kernel[1], "s");
  // The output is the reduction, each term scaled by the window's count: the plain schedule runs
  // it in lanes along the row, the window's sums inside. A stage of sums before the division ran
  // scalar through memory (PoolFormer's 3x3 pooling at 56x56 over 64 channels: 0.7 ms, ONNX
  // Runtime's 0.02).
  return te::compute("out", out, [&](const std::vector<Var>& i) {
    Expr n = window_count(i[2], strides[0], kernel[0], pads[0], h, pads[2], include_pad) *
             window_count(i[3], strides[1], kernel[1], pads[1], w, pads[3], include_pad);
    Expr scale = f32(1) / ir::cast(ir::Type::f32(), n);
    return te::sum(padded(i[0], i[1], i[2] * strides[0] + r->var, i[3] * strides[1] + s->var) * scale, {r, s});
  });
}

// Resize (and opset 9's Upsample) of an NCHW tensor's rows and columns, as ONNX Runtime computes
// it: nearest (each nearest_mode), bilinear or bicubic, every coordinate_transformation_mode but
// tf_crop_and_resize; the output's shape from shape inference, the scale from the scales input or
// the sizes.
// `xs` and `out` are the NCHW shapes; with `block` > 0, `x` holds the input in NCHW[block]c and the
// output is written so, a vector of the block's channels per pixel.
StatusOr<te::Tensor> resize(const Graph& graph, const Node& node, const te::Tensor& x, const std::vector<int64_t>& xs,
                            const std::vector<int64_t>& out, int64_t block = 0) {
  if (xs.size() != 4 || out.size() != 4 || out[0] != xs[0] || out[1] != xs[1] || (block > 0 && xs[1] % block != 0))
    return unsupported(node, "only the rows and columns of an NCHW tensor are resized");
  auto text = [&](const char* key, const char* fallback) {
    return node.attributes.count(key) ? node.attributes.at(key).s : std::string(fallback);
  };
  std::string mode = text("mode", "nearest"), transform = text("coordinate_transformation_mode", "half_pixel"),
              nearest = text("nearest_mode", "round_prefer_floor");
  if (node.op == "Upsample") transform = "asymmetric", nearest = "floor";
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return unsupported(node, fmt::format("mode '{}' is not supported", mode));
  static const std::set<std::string> kTransforms = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                                    "tf_half_pixel_for_nn", "half_pixel_symmetric"};
  if (!kTransforms.count(transform))
    return unsupported(node, fmt::format("coordinate_transformation_mode '{}' is not supported", transform));
  static const std::set<std::string> kNearest = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  if (mode == "nearest" && !kNearest.count(nearest)) return unsupported(node, fmt::format("nearest_mode '{}' is not supported", nearest));
  // The scales: the constant scales input where there is one, else output over input.
  std::vector<double> scale = {1, 1, double(out[2]) / double(xs[2]), double(out[3]) / double(xs[3])};
  size_t scales_input = node.op == "Upsample" ? 1 : 2;
  bool given = false;
  if (node.inputs.size() > scales_input && !node.inputs[scales_input].empty()) {
    const Value* v = graph.find(node.inputs[scales_input]);
    if (!v || !v->constant || !v->is_float) return unsupported(node, "scales computed at run time are not supported");
    if (v->floats.size() == 4) scale = {v->floats[0], v->floats[1], v->floats[2], v->floats[3]}, given = true;
    else if (!v->floats.empty()) return unsupported(node, "scales that are not one per axis");
  }
  if (scale[2] <= 0 || scale[3] <= 0) return unsupported(node, "scales must be positive");
  // Where output coordinate `at` falls in the input along an axis of `in` -> `o` elements. A
  // scale from the sizes divides as the ratio of the two integers (ONNX Runtime's 7 -> 16 columns
  // put output 8 on 3.5, which float32's 16/7 would put on 3.4999998).
  auto source = [&](Expr at, int64_t in, int64_t o, double s) -> Expr {
    auto unscale = [&](Expr v) { return given ? v / f32(s) : v * f32(double(in)) / f32(double(o)); };
    Expr v = ir::cast(ir::Type::f32(), at);
    if (transform == "asymmetric") return unscale(v);
    if (transform == "tf_half_pixel_for_nn") return unscale(v + f32(0.5));
    if (transform == "align_corners") return o > 1 ? v * f32(double(in - 1)) / f32(double(o - 1)) : f32(0);
    if (transform == "pytorch_half_pixel" && o <= 1) return f32(0);
    if (transform == "half_pixel_symmetric") {
      double adjust = double(o) / (s * double(in));
      double offset = double(in) / 2 * (1 - adjust);
      return f32(offset) + unscale(v + f32(0.5)) - f32(0.5);
    }
    return unscale(v + f32(0.5)) - f32(0.5);
  };
  auto clamp = [](Expr i, int64_t size) { return ir::max(ir::min(i, ir::int_imm(size - 1)), ir::int_imm(0)); };
  std::vector<int64_t> shape = block > 0 ? blocked_shape(out, block) : out;
  auto read = [&](const std::vector<Var>& i, Expr y, Expr xx) { return block > 0 ? x(i[0], i[1], y, xx, i[4]) : x(i[0], i[1], y, xx); };
  if (mode == "nearest") {
    auto pick = [&](Expr v, int64_t size) {
      Expr i = nearest == "floor"  ? floor_of(v)
               : nearest == "ceil" ? ceil_of(v)
               : nearest == "round_prefer_ceil" ? floor_of(v + f32(0.5))
                                                 : ceil_of(v - f32(0.5));
      return clamp(i, size);
    };
    return te::compute("out", shape, [&](const std::vector<Var>& i) {
      return read(i, pick(source(i[2], xs[2], out[2], scale[2]), xs[2]), pick(source(i[3], xs[3], out[3], scale[3]), xs[3]));
    });
  }
  if (mode == "cubic") {
    // Keys' cubic convolution over the four inputs around the coordinate (not clamped), at
    // distances 1 + t, t, 1 - t and 2 - t where t is its fraction; the inputs past an edge read
    // the edge, or with exclude_outside weigh nothing and the others are scaled to sum to one.
    // PyTorch's bicubic interpolation (DINOv2's position embeddings) is this with a = -0.75.
    double a = node.float_attr("cubic_coeff_a", -0.75f);
    bool exclude = node.int_attr("exclude_outside", 0) != 0;
    struct Cubic {
      Expr index[4], weight[4];
    };
    auto cubic = [&](Expr at, int64_t in, int64_t o, double s) {
      Expr v = source(at, in, o, s);
      Expr first = floor_of(v);
      Expr t = v - ir::cast(ir::Type::f32(), first);
      auto near = [&](Expr d) { return (f32(a + 2) * d - f32(a + 3)) * d * d + f32(1); };
      auto far = [&](Expr d) { return ((f32(a) * d - f32(5 * a)) * d + f32(8 * a)) * d - f32(4 * a); };
      Cubic c{{}, {far(f32(1) + t), near(t), near(f32(1) - t), far(f32(2) - t)}};
      Expr total = f32(0);
      for (int k = 0; k < 4; ++k) {
        Expr i = first + (k - 1);
        c.index[k] = clamp(i, in);
        if (exclude) c.weight[k] = ir::select(ir::logical_and(ir::ge(i, ir::int_imm(0)), ir::lt(i, ir::int_imm(in))), c.weight[k], f32(0));
        total = total + c.weight[k];
      }
      if (exclude)
        for (Expr& w : c.weight) w = w / total;
      return c;
    };
    return te::compute("out", shape, [&](const std::vector<Var>& i) {
      Cubic r = cubic(i[2], xs[2], out[2], scale[2]), c = cubic(i[3], xs[3], out[3], scale[3]);
      Expr sum = f32(0);
      for (int y = 0; y < 4; ++y) {
        Expr row = f32(0);
        for (int k = 0; k < 4; ++k) row = row + read(i, r.index[y], c.index[k]) * c.weight[k];
        sum = sum + row * r.weight[y];
      }
      return sum;
    });
  }
  // Bilinear: the coordinate clamped into the input, its two neighbours and the weight of the second.
  struct Taps {
    Expr first, second, weight;
  };
  auto taps = [&](Expr at, int64_t in, int64_t o, double s) {
    Expr v = ir::max(ir::min(source(at, in, o, s), f32(double(in - 1))), f32(0));
    Expr first = ir::cast(ir::Type::i64(), v);
    return Taps{first, ir::min(first + 1, ir::int_imm(in - 1)), v - ir::cast(ir::Type::f32(), first)};
  };
  if (block == 0 && out[2] > xs[2]) {
    // Upsampling NCHW rows (a segmentation head's 8x): each input row's columns first, a stage of
    // [N, C, H, OW] whose reads gather along the row, then every output row from two of those rows
    // in contiguous vectors. Computed per output, the columns' gathers ran for every output row
    // (DeepLabV3's 21 classes from 32x32 to 256x256: 2.1 ms, ONNX Runtime's 0.9).
    te::Tensor columns = te::compute("columns", {xs[0], xs[1], xs[2], out[3]}, [&](const std::vector<Var>& i) {
      Taps c = taps(i[3], xs[3], out[3], scale[3]);
      return x(i[0], i[1], i[2], c.first) * (f32(1) - c.weight) + x(i[0], i[1], i[2], c.second) * c.weight;
    });
    return te::compute("out", shape, [&](const std::vector<Var>& i) {
      Taps r = taps(i[2], xs[2], out[2], scale[2]);
      return columns(i[0], i[1], r.first, i[3]) * (f32(1) - r.weight) + columns(i[0], i[1], r.second, i[3]) * r.weight;
    });
  }
  return te::compute("out", shape, [&](const std::vector<Var>& i) {
    Taps r = taps(i[2], xs[2], out[2], scale[2]), c = taps(i[3], xs[3], out[3], scale[3]);
    auto row = [&](Expr y) { return read(i, y, c.first) * (f32(1) - c.weight) + read(i, y, c.second) * c.weight; };
    return row(r.first) * (f32(1) - r.weight) + row(r.second) * r.weight;
  });
}

// An index read at run time (held as float32) as a position along an axis of `dim`: a negative
// one counts from the end; one out of range reads the nearest position instead of memory outside
// the tensor (ONNX Runtime refuses it).
Expr index_within(const Expr& index, int64_t dim) {
  Expr k = ir::cast(ir::Type::i64(), index);
  k = ir::select(ir::lt(k, ir::int_imm(0)), k + dim, k);
  return ir::max(ir::min(k, ir::int_imm(dim - 1)), ir::int_imm(0));
}

// A reduction's term of x, summed (or its maximum taken) over the reduced axes: the minimum is the
// negated maximum of the negated input; L1, L2 and the sum of squares sum |x| or x^2.
Expr reduction_term(const std::string& op, const Expr& v) {
  if (op == "ReduceMin") return f32(0) - v;
  if (op == "ReduceL1") return ir::max(v, f32(0) - v);
  if (op == "ReduceL2" || op == "ReduceSumSquare") return v * v;
  return v;
}

// What the sum (or maximum) of `count` terms becomes: L2's square root (F.normalize's norm in
// sentence embeddings and CLIP), the mean, the minimum's sign back.
Expr reduction_result(const std::string& op, const Expr& total, double count) {
  if (op == "ReduceL2") return ir::call(ir::Type::f32(), "sqrt", {total});
  if (op == "ReduceMean" || op == "GlobalAveragePool") return total * f32(1.0 / count);
  if (op == "ReduceMin") return f32(0) - total;
  return total;
}

bool reduction_finishes(const std::string& op) {
  return op == "ReduceL2" || op == "ReduceMean" || op == "GlobalAveragePool" || op == "ReduceMin";
}

// Whether `node` is a reduction the plain schedule may vectorize (mean, sum, max, min, L1, L2, sum
// of squares), with its input and its axes as written (ReduceSum's an input from opset 13).
bool reduction_of(const Graph& graph, const Node& node, const Value*& x, std::vector<int64_t>& axes) {
  static const std::set<std::string> kReductions = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
                                                    "ReduceL1", "ReduceL2", "ReduceSumSquare"};
  x = node.inputs.empty() ? nullptr : graph.find(node.inputs[0]);
  if (!kReductions.count(node.op) || !x) return false;
  axes = node.ints_attr("axes");
  if (node.op == "ReduceSum" && node.inputs.size() > 1) constant_ints(graph, node, 1, axes);
  return true;
}

}  // namespace

bool is_row_wise(const Graph& graph, const Node& node) {
  static const std::set<std::string> kRowWise = {"LayerNormalization", "SkipLayerNormalization", "InstanceNormalization",
                                                 "RMSNormalization"};
  if (kRowWise.count(node.op)) return true;
  const Value* out = node.outputs.empty() ? nullptr : graph.find(node.outputs[0]);
  if (node.op == "Softmax" || node.op == "LogSoftmax") return out && is_last_axis(node.int_attr("axis", -1), out->shape.size());
  const Value* x = nullptr;
  std::vector<int64_t> axes;
  return reduction_of(graph, node, x, axes) && !x->shape.empty() && axes.size() == 1 &&
         is_last_axis(axes[0], x->shape.size());
}

bool reduces_along_last_axis_lanes(const Graph& graph, const Node& node) {
  const Value* x = nullptr;
  std::vector<int64_t> axes;
  // No axes: all of them.
  if (!reduction_of(graph, node, x, axes) || x->shape.size() < 2 || x->shape.back() < 16 || axes.empty()) return false;
  for (int64_t a : axes)
    if (normalize_axis(a, x->shape.size()) < 0 || is_last_axis(a, x->shape.size())) return false;
  return true;
}

bool is_view(const std::string& op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity" || op == "Dropout";
}

StatusOr<Computed> operator_compute(const Graph& graph, const Node& node) {
  if (node.outputs.size() != 1) return unsupported(node, "has more than one output");
  TF_ASSIGN_OR_RETURN(const Value* out_value, graph.value_of(node, node.outputs[0]));
  std::vector<int64_t> out = dims_of(*out_value);
  std::vector<std::string> names;
  // A Clip's bounds, a Slice's ranges, Gather's indices, a reduction's axes, Pow's exponent and
  // Expand's shape are constants that become part of the definition, not tensors it reads.
  static const std::set<std::string> kFirstInputOnly = {"Clip", "Expand", "Slice", "Gather", "Pow", "Pad", "ReduceMean",
                                                        "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2",
                                                        "ReduceSumSquare", "ReduceLogSumExp", "Resize", "Upsample", "Tile",
                                                        "CumSum"};
  // Gather reads its indices as a tensor when they are computed at run time (token ids) or too
  // many to write into the definition (a position per token).
  const Value* indices = node.op == "Gather" && node.inputs.size() > 1 ? graph.find(node.inputs[1]) : nullptr;
  bool runtime_indices = indices && (!indices->constant || indices->elements() > 16);
  TF_ASSIGN_OR_RETURN(std::vector<te::Tensor> in,
                      inputs_of(graph, node, kFirstInputOnly.count(node.op) && !runtime_indices ? 1 : -1, names));
  if (in.empty()) return unsupported(node, "has no input");
  const te::Tensor& x = in[0];
  const std::string& op = node.op;
  te::Tensor result;

  if (op == "Clip") {
    float lo, hi;
    if (!clip_bounds(graph, node, lo, hi)) return unsupported(node, "bounds that are not constants");
    result = te::compute("out", out, [&](const std::vector<Var>& i) { return ir::min(ir::max(x(as_exprs(i)), f32(lo)), f32(hi)); });
  } else if (op == "Pow") {
    const Value* e = node.inputs.size() > 1 ? graph.find(node.inputs[1]) : nullptr;
    if (!e || !e->constant || e->elements() != 1) return unsupported(node, "only a constant exponent is supported");
    double p = e->is_float ? e->floats.at(0) : static_cast<double>(e->ints.at(0));
    // Squares and cubes (LayerNorm, GELU's tanh form), square roots and their inverse (Swin's
    // attention scale).
    if (p != 0.5 && p != -0.5 && (p != std::floor(p) || p < 1 || p > 4))
      return unsupported(node, fmt::format("exponent {} is not supported", p));
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      Expr v = x(as_exprs(i));
      if (p == 0.5) return ir::call(ir::Type::f32(), "sqrt", {v});
      if (p == -0.5) return f32(1) / ir::call(ir::Type::f32(), "sqrt", {v});
      Expr y = v;
      for (int k = 1; k < static_cast<int>(p); ++k) y = y * v;
      return y;
    });
  } else if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax" || op == "ReduceMin" || op == "ReduceL1" ||
             op == "ReduceL2" || op == "ReduceSumSquare" || op == "ReduceLogSumExp") {
    size_t rank = x.shape().size();
    std::vector<int64_t> axes = node.ints_attr("axes");
    if (op == "ReduceSum" && node.inputs.size() > 1 && !constant_ints(graph, node, 1, axes))
      return unsupported(node, "axes computed at run time are not supported");
    std::vector<bool> reduced(rank, axes.empty());
    for (int64_t a : axes) {
      int64_t n = normalize_axis(a, rank);
      if (n < 0) return unsupported(node, fmt::format("axis {} is out of range", a));
      reduced[static_cast<size_t>(n)] = true;
    }
    bool keep = node.int_attr("keepdims", 1) != 0;
    std::vector<te::IterVar> axes_iter;
    double count = 1;
    for (size_t d = 0; d < rank; ++d)
      if (reduced[d]) {
        axes_iter.push_back(te::reduce_axis(x.shape()[d], fmt::format("r{}", d)));
        count *= static_cast<double>(x.shape()[d]);
      }
    auto read = [&](const std::vector<Var>& i) { return read_reduced(x, reduced, keep, i, vars_of(axes_iter)); };
    // A reduction is a stage of its own (reduction_term, reduction_result); LogSumExp sums
    // e^(x - max) after a stage of the maxima.
    bool is_max = op == "ReduceMax", is_min = op == "ReduceMin", log_sum_exp = op == "ReduceLogSumExp";
    auto term = [&](Expr v) { return reduction_term(op, v); };
    auto finish = [&](Expr v) { return reduction_result(op, v, count); };
    if (rank > 0 && axes_iter.size() == 1 && reduced[rank - 1] && !log_sum_exp) {
      // The last axis alone: a statistic of rows, across the row's lanes (RMSNorm's mean of squares
      // written out, a pooling over tokens).
      std::vector<int64_t> rows(x.shape().begin(), x.shape().end() - 1);
      te::Tensor stat = row_statistic("total", rows, x.shape().back(), is_max || is_min,
                                      [&](const std::vector<Expr>& r, Expr k) { return term(x(with_last(r, k))); });
      result = te::compute("out", out, [&](const std::vector<Var>& i) { return finish(stat(keep ? row_of(i) : as_exprs(i))); });
    } else if (log_sum_exp) {
      te::Tensor most = te::compute("most", out, [&](const std::vector<Var>& i) { return te::max_reduce(read(i), axes_iter); });
      // The sum's own reduction axes (an axis belongs to one stage).
      std::vector<te::IterVar> again;
      for (size_t k = 0; k < axes_iter.size(); ++k) again.push_back(te::reduce_axis(axes_iter[k]->extent, fmt::format("e{}", k)));
      te::Tensor total = te::compute("total", out, [&](const std::vector<Var>& i) {
        return te::sum(ir::call(ir::Type::f32(), "exp", {read_reduced(x, reduced, keep, i, vars_of(again)) - most(as_exprs(i))}), again);
      });
      result = te::compute("out", out, [&](const std::vector<Var>& i) {
        return most(as_exprs(i)) + ir::call(ir::Type::f32(), "log", {total(as_exprs(i))});
      });
    } else {
      te::Tensor total = te::compute("total", out, [&](const std::vector<Var>& i) {
        if (is_max || is_min) return te::max_reduce(term(read(i)), axes_iter);
        return te::sum(term(read(i)), axes_iter);
      });
      result = !reduction_finishes(op) ? total : te::compute("out", out, [&](const std::vector<Var>& i) { return finish(total(as_exprs(i))); });
    }
  } else if (op == "Slice") {
    size_t rank = x.shape().size();
    std::vector<int64_t> starts, ends, axes, steps;
    if (!constant_ints(graph, node, 1, starts) || !constant_ints(graph, node, 2, ends))
      return unsupported(node, "starts and ends computed at run time are not supported");
    if (!constant_ints(graph, node, 3, axes))
      for (size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    if (!constant_ints(graph, node, 4, steps)) steps.assign(starts.size(), 1);
    if (axes.size() != starts.size() || steps.size() != starts.size() || ends.size() != starts.size())
      return unsupported(node, "starts, ends, axes and steps of different lengths");
    // Each output index i of a sliced axis reads begin + i * step.
    std::vector<int64_t> begin(rank, 0), step(rank, 1);
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = normalize_axis(axes[k], rank);
      if (a < 0 || steps[k] == 0) return unsupported(node, "an axis out of range or a step of 0");
      int64_t dim = x.shape()[static_cast<size_t>(a)];
      int64_t b = starts[k] < 0 ? starts[k] + dim : starts[k];
      b = steps[k] > 0 ? std::clamp<int64_t>(b, 0, dim) : std::clamp<int64_t>(b, 0, dim - 1);
      begin[static_cast<size_t>(a)] = b;
      step[static_cast<size_t>(a)] = steps[k];
    }
    if (out.size() != rank) return unsupported(node, "output rank differs from the input's");
    for (size_t d = 0; d < rank; ++d) {
      int64_t last = begin[d] + (out[d] - 1) * step[d];
      if (last < 0 || last >= x.shape()[d]) return unsupported(node, "the slice reaches outside its input");
    }
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      std::vector<Expr> at;
      for (size_t d = 0; d < rank; ++d) at.push_back(ir::int_imm(begin[d]) + Expr(i[d]) * step[d]);
      return x(at);
    });
  } else if (op == "Pad") {
    size_t rank = x.shape().size();
    std::vector<int64_t> pads = node.ints_attr("pads");
    if (node.inputs.size() > 1 && !constant_ints(graph, node, 1, pads))
      return unsupported(node, "pads computed at run time are not supported");
    std::string mode = node.attributes.count("mode") ? node.attributes.at("mode").s : "constant";
    if ((mode != "constant" && mode != "edge" && mode != "reflect") || pads.size() != 2 * rank)
      return unsupported(node, fmt::format("mode '{}' with {} pads for {} axes is not supported", mode, pads.size(), rank));
    // Reflection mirrors about the edge without repeating it: each pad shorter than its axis.
    for (size_t d = 0; mode == "reflect" && d < rank; ++d)
      if (std::max(pads[d], pads[d + rank]) >= x.shape()[d] || std::min(pads[d], pads[d + rank]) < 0)
        return unsupported(node, fmt::format("reflect pads {} of an axis of {}", shape_string(pads), x.shape()[d]));
    float fill = node.float_attr("value", 0.f);
    if (node.inputs.size() > 2 && !node.inputs[2].empty()) {
      const Value* v = graph.find(node.inputs[2]);
      if (!v || !v->constant || v->elements() != 1) return unsupported(node, "a constant_value that is not a constant");
      fill = v->is_float ? v->floats.at(0) : static_cast<float>(v->ints.at(0));
    }
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      // Inside the input, read it (clamped, so that lanes outside read in bounds); outside, the
      // fill (constant), the nearest edge (edge) or the mirror image about the edge (reflect).
      Expr inside = ir::bool_imm(true);
      std::vector<Expr> at;
      for (size_t d = 0; d < rank; ++d) {
        int64_t n = x.shape()[d];
        Expr p = Expr(i[d]) - pads[d];
        inside = ir::logical_and(inside, ir::logical_and(ir::ge(p, ir::int_imm(0)), ir::lt(p, ir::int_imm(n))));
        if (mode == "reflect") p = ir::select(ir::lt(p, ir::int_imm(0)), ir::int_imm(0) - p, ir::select(ir::lt(p, ir::int_imm(n)), p, ir::int_imm(2 * (n - 1)) - p));
        at.push_back(ir::max(ir::min(p, ir::int_imm(n - 1)), ir::int_imm(0)));
      }
      return mode == "constant" ? ir::select(inside, x(at), f32(fill)) : x(at);
    });
  } else if (op == "Gather" && runtime_indices) {
    size_t rank = x.shape().size();
    int64_t axis = normalize_axis(node.int_attr("axis", 0), rank);
    size_t index_rank = indices->shape.size();
    if (axis < 0 || in.size() != 2 || out.size() != std::max<size_t>(rank - 1 + index_rank, 1))
      return unsupported(node, "an axis out of range, or an output shape that does not follow from the inputs'");
    int64_t dim = x.shape()[static_cast<size_t>(axis)];
    const te::Tensor& idx = in[1];
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      std::vector<Expr> where;
      for (size_t d = 0; d < index_rank; ++d) where.push_back(i[static_cast<size_t>(axis) + d]);
      if (where.empty()) where.push_back(ir::int_imm(0));
      std::vector<Expr> at;
      for (size_t d = 0; d < static_cast<size_t>(axis); ++d) at.push_back(i[d]);
      at.push_back(index_within(idx(where), dim));
      for (size_t d = static_cast<size_t>(axis) + 1; d < rank; ++d) at.push_back(i[d - 1 + index_rank]);
      return x(at);
    });
  } else if (op == "GatherElements") {
    // out[i] = x[i with the axis' position taken from indices[i]], shaped as the indices, which
    // may be shorter than x on every axis (RoBERTa's token types: a [1, 512] buffer read at the
    // [1, 128] positions computed from the mask).
    size_t rank = x.shape().size();
    int64_t axis = normalize_axis(node.int_attr("axis", 0), rank);
    if (axis < 0 || in.size() != 2 || in[1].shape() != out || out.size() != rank)
      return unsupported(node, "an axis out of range, or indices that are not shaped as the output");
    for (size_t d = 0; d < rank; ++d)
      if (static_cast<int64_t>(d) != axis && out[d] > x.shape()[d])
        return unsupported(node, fmt::format("indices {} are longer than the input {} on axis {}", shape_string(out),
                                             shape_string(x.shape()), d));
    int64_t dim = x.shape()[static_cast<size_t>(axis)];
    const te::Tensor& idx = in[1];
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      std::vector<Expr> at = as_exprs(i);
      at[static_cast<size_t>(axis)] = index_within(idx(at), dim);
      return x(at);
    });
  } else if (op == "GatherND") {
    // Each row of the indices' last axis (k long) names a slice of the data's trailing axes.
    if (in.size() != 2 || node.int_attr("batch_dims", 0) != 0) return unsupported(node, "only batch_dims 0 is supported");
    const te::Tensor& idx = in[1];
    size_t rank = x.shape().size(), index_rank = idx.shape().size();
    int64_t k = idx.shape().back();
    if (k < 1 || k > static_cast<int64_t>(rank) || out.size() != index_rank - 1 + rank - static_cast<size_t>(k))
      return unsupported(node, "indices that do not match the data's rank");
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      std::vector<Expr> at;
      for (int64_t d = 0; d < k; ++d) {
        std::vector<Expr> row(i.begin(), i.begin() + static_cast<std::ptrdiff_t>(index_rank - 1));
        row.push_back(ir::int_imm(d));
        at.push_back(index_within(idx(row), x.shape()[static_cast<size_t>(d)]));
      }
      for (size_t d = index_rank - 1; d < out.size(); ++d) at.push_back(i[d]);
      return x(at);
    });
  } else if (op == "Gather") {
    size_t rank = x.shape().size();
    int64_t axis = normalize_axis(node.int_attr("axis", 0), rank);
    const Value* idx = node.inputs.size() > 1 ? graph.find(node.inputs[1]) : nullptr;
    if (axis < 0 || !idx || !idx->constant || idx->is_float) return unsupported(node, "only constant indices are supported");
    int64_t dim = x.shape()[static_cast<size_t>(axis)];
    std::vector<int64_t> indices = idx->ints;
    for (int64_t& k : indices) {
      if (k < 0) k += dim;
      if (k < 0 || k >= dim) return unsupported(node, fmt::format("index {} is out of range", k));
    }
    // Output: x's axes before `axis`, the indices' axes, x's axes after it.
    size_t index_rank = idx->shape.size();
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      // The flat position in the indices tensor, then its value: a chain of selects over them
      // (indices are few: a class token, a position).
      Expr flat = ir::int_imm(0);
      for (size_t d = 0; d < index_rank; ++d) flat = flat * idx->shape[d] + Expr(i[static_cast<size_t>(axis) + d]);
      Expr chosen = ir::int_imm(indices.back());
      for (size_t k = indices.size() - 1; k-- > 0;)
        chosen = ir::select(ir::compare(ir::CompareOp::kEQ, flat, ir::int_imm(static_cast<int64_t>(k))),
                            ir::int_imm(indices[k]), chosen);
      std::vector<Expr> at;
      for (size_t d = 0; d < static_cast<size_t>(axis); ++d) at.push_back(i[d]);
      at.push_back(chosen);
      for (size_t d = static_cast<size_t>(axis) + 1; d < rank; ++d) at.push_back(i[d - 1 + index_rank]);
      return x(at);
    });
  } else if (op == "Softmax" || op == "LogSoftmax") {
    int64_t a = normalize_axis(node.int_attr("axis", -1), out.size());
    if (a < 0) return unsupported(node, fmt::format("axis {} is out of range", node.int_attr("axis", -1)));
    TF_RETURN_IF_ERROR(check_broadcasts(node, in, out));
    // Rows along `axis`: the last one's statistics in the row's lanes (row_statistic), another's
    // (YOLOv8's distribution focal loss over axis 1) as a plain reduction.
    auto axis = static_cast<size_t>(a);
    bool last = axis + 1 == out.size();
    std::vector<int64_t> rows = out;
    rows.erase(rows.begin() + a);
    int64_t n = out[axis];
    auto row_at = [&](const std::vector<Var>& i) {
      std::vector<Expr> r = as_exprs(i);
      r.erase(r.begin() + a);
      return r;
    };
    auto at_k = [&](std::vector<Expr> r, Expr k) {
      r.insert(r.begin() + a, std::move(k));
      return r;
    };
    auto statistic = [&](const std::string& name, bool max, const std::function<Expr(const std::vector<Expr>&, Expr)>& f) {
      if (last) return row_statistic(name, rows, n, max, f);
      auto k = te::reduce_axis(n, name + "_k");
      return te::compute(name, rows, [&](const std::vector<Var>& r) {
        Expr v = f(as_exprs(r), k->var);
        return max ? te::max_reduce(v, {k}) : te::sum(v, {k});
      });
    };
    // Attention's scale and mask, when the passes folded them in (passes/fuse_row_inputs.h): the
    // softmax of x * scale + mask, each term computed where it is read.
    float scale = node.float_attr("scale", 1.f);
    auto term = [&](const std::vector<Expr>& at) {
      Expr v = x(at);
      if (scale != 1.f) v = v * f32(scale);
      return in.size() > 1 ? v + broadcast_read(in[1], at) : v;
    };
    te::Tensor m = statistic("row_max", true, [&](const std::vector<Expr>& r, Expr k) { return term(at_k(r, k)); });
    // The exponentials once, in a stage of their own that the sum and the quotient read.
    te::Tensor e = te::compute("shifted_exp", out, [&](const std::vector<Var>& i) {
      return ir::call(ir::Type::f32(), "exp", {term(as_exprs(i)) - m(row_at(i))});
    });
    te::Tensor s = statistic("row_sum", false, [&](const std::vector<Expr>& r, Expr k) { return e(at_k(r, k)); });
    if (op == "LogSoftmax") {
      // x - max - ln(sum of e^(x - max)): the logarithm once a row.
      te::Tensor log_sum = te::compute("log_sum", rows, [&](const std::vector<Var>& i) {
        return m(as_exprs(i)) + ir::call(ir::Type::f32(), "log", {s(as_exprs(i))});
      });
      result = te::compute("out", out, [&](const std::vector<Var>& i) { return term(as_exprs(i)) - log_sum(row_at(i)); });
    }
    // Divisions once a row: the row's elements multiply.
    if (op == "Softmax") {
      te::Tensor inv = te::compute("inv_sum", rows, [&](const std::vector<Var>& i) { return f32(1) / s(as_exprs(i)); });
      result = te::compute("out", out, [&](const std::vector<Var>& i) { return e(as_exprs(i)) * inv(row_at(i)); });
    }
  } else if (op == "LayerNormalization" || op == "SkipLayerNormalization" || op == "InstanceNormalization") {
    // InstanceNormalization (style transfer, and GroupNorm as the TorchScript exporter writes it:
    // a Reshape to [N, groups, rest] before it) normalizes each [n, c] over the rest of its axes:
    // rows of the rest, the tensor read as [N, C, rest] (how it is stored), scale and bias per c.
    bool instance = op == "InstanceNormalization";
    if (instance) {
      if (out.size() < 3 || in.size() != 3) return unsupported(node, "expects an input of 3 or more axes, a scale and a bias");
      if (in[1].shape() != std::vector<int64_t>{out[1]} || in[2].shape() != std::vector<int64_t>{out[1]})
        return unsupported(node, fmt::format("its scale and bias must have one value per channel ({})", out[1]));
      int64_t rest = 1;
      for (size_t d = 2; d < out.size(); ++d) rest *= out[d];
      out = {out[0], out[1], rest};
      in[0] = te::placeholder("in0", out);
    } else if (!is_last_axis(node.int_attr("axis", -1), out.size())) {
      return unsupported(node, "only the last axis is supported");
    } else {
      TF_RETURN_IF_ERROR(check_broadcasts(node, in, out));
    }
    float eps = node.float_attr("epsilon", 1e-5f);
    int64_t n = out.back();
    std::vector<int64_t> rows(out.begin(), out.end() - 1);
    // SkipLayerNormalization (a residual Add the passes folded in: passes/fuse_row_inputs.h)
    // normalizes input + skip, the sum computed in each pass over the row, from the two tensors.
    bool skip = op == "SkipLayerNormalization";
    if (skip && in.size() < 2) return unsupported(node, "has no skip input");
    auto input = [&](const std::vector<Expr>& at) { return skip ? broadcast_read(x, at) + broadcast_read(in[1], at) : x(at); };
    // The scale and the bias follow the input (and the skip).
    size_t affine = skip ? 2 : 1;
    te::Tensor total = row_statistic("total", rows, n, false, [&](const std::vector<Expr>& r, Expr k) { return input(with_last(r, k)); });
    te::Tensor mean = te::compute("mean", rows, [&](const std::vector<Var>& i) { return total(as_exprs(i)) / f32(double(n)); });
    te::Tensor squares = row_statistic("squares", rows, n, false, [&](const std::vector<Expr>& r, Expr k) {
      Expr d = input(with_last(r, k)) - mean(r);
      return d * d;
    });
    // The square root and the division once a row: the row's elements multiply.
    te::Tensor inv_std = te::compute("inv_std", rows, [&](const std::vector<Var>& i) {
      return f32(1) / ir::call(ir::Type::f32(), "sqrt", {squares(as_exprs(i)) / f32(double(n)) + f32(eps)});
    });
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      std::vector<Expr> r = row_of(i);
      Expr y = (input(as_exprs(i)) - mean(r)) * inv_std(r);
      if (instance) return y * in[1](i[1]) + in[2](i[1]);
      if (in.size() > affine) y = y * broadcast_read(in[affine], i);
      if (in.size() > affine + 1) y = y + broadcast_read(in[affine + 1], i);
      return y;
    });
  } else if (op == "RMSNormalization") {
    // x / sqrt(mean of x^2 + eps) x scale over the last axis (LLaMA's, T5's; passes/fuse_patterns.h
    // recognizes it written out): the square root and the division once a row.
    if (!is_last_axis(node.int_attr("axis", -1), out.size())) return unsupported(node, "only the last axis is supported");
    TF_RETURN_IF_ERROR(check_broadcasts(node, in, out));
    float eps = node.float_attr("epsilon", 1e-5f);
    int64_t n = out.back();
    std::vector<int64_t> rows(out.begin(), out.end() - 1);
    te::Tensor squares = row_statistic("squares", rows, n, false, [&](const std::vector<Expr>& r, Expr k) {
      Expr v = x(with_last(r, k));
      return v * v;
    });
    te::Tensor inv_rms = te::compute("inv_rms", rows, [&](const std::vector<Var>& i) {
      return f32(1) / ir::call(ir::Type::f32(), "sqrt", {squares(as_exprs(i)) / f32(double(n)) + f32(eps)});
    });
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      Expr y = x(as_exprs(i)) * inv_rms(row_of(i));
      return in.size() > 1 ? y * broadcast_read(in[1], i) : y;
    });
  } else if ((op == "GlobalAveragePool" || op == "GlobalMaxPool") && x.shape().size() != 4) {
    // Over a 1-D (audio: [N, C, L]) or 3-D map: every axis after the channels.
    if (x.shape().size() < 3 || out.size() != x.shape().size()) return unsupported(node, "expects an input of 3 or more axes");
    std::vector<te::IterVar> axes;
    std::vector<bool> reduced(x.shape().size(), true);
    reduced[0] = reduced[1] = false;
    double count = 1;
    for (size_t d = 2; d < x.shape().size(); ++d) {
      axes.push_back(te::reduce_axis(x.shape()[d], fmt::format("r{}", d)));
      count *= static_cast<double>(x.shape()[d]);
    }
    bool average = op == "GlobalAveragePool";
    te::Tensor total = te::compute("total", out, [&](const std::vector<Var>& i) {
      Expr v = read_reduced(x, reduced, true, i, vars_of(axes));
      return average ? te::sum(v, axes) : te::max_reduce(v, axes);
    });
    result = average ? te::compute("out", out, [&](const std::vector<Var>& i) { return total(as_exprs(i)) / f32(count); }) : total;
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
      // With ceil_mode (GoogLeNet) the last windows reach past the padding: the padded stage
      // covers every window the output has, -inf beyond the input.
      int64_t hp = std::max(h + pads[0] + pads[2], (out[2] - 1) * strides[0] + (kernel[0] - 1) * dilations[0] + 1);
      int64_t wp = std::max(w + pads[1] + pads[3], (out[3] - 1) * strides[1] + (kernel[1] - 1) * dilations[1] + 1);
      te::Tensor padded = te::compute("padded", {x.shape()[0], x.shape()[1], hp, wp}, [&](const std::vector<Var>& i) {
        return pool_read(i[2] - pads[0], i[3] - pads[1], h, w, [&](Expr y, Expr xx) { return x(i[0], i[1], y, xx); });
      });
      auto r = te::reduce_axis(kernel[0], "r");
      auto s = te::reduce_axis(kernel[1], "s");
      result = te::compute("out", out, [&](const std::vector<Var>& i) {
        return te::max_reduce(padded(i[0], i[1], i[2] * strides[0] + r->var * dilations[0],
                                     i[3] * strides[1] + s->var * dilations[1]), {r, s});
      });
    }
  } else if (op == "ConvTranspose") {
    TF_ASSIGN_OR_RETURN(result, conv_transpose(node, in, out));
  } else if (op == "AveragePool") {
    TF_ASSIGN_OR_RETURN(result, average_pool(node, x, out));
  } else if (op == "Resize" || op == "Upsample") {
    TF_ASSIGN_OR_RETURN(result, resize(graph, node, x, x.shape(), out));
  } else if (op == "DepthToSpace" || op == "SpaceToDepth") {
    int64_t b = node.int_attr("blocksize", 0);
    const auto& xs = x.shape();
    bool to_space = op == "DepthToSpace";
    if (xs.size() != 4 || b < 1 || (to_space ? xs[1] % (b * b) != 0 : (xs[2] % b != 0 || xs[3] % b != 0)))
      return unsupported(node, "blocksize does not divide its NCHW input");
    bool crd = to_space && node.attributes.count("mode") && node.attributes.at("mode").s == "CRD";
    if (to_space && node.attributes.count("mode") && !crd && node.attributes.at("mode").s != "DCR")
      return unsupported(node, "mode is neither DCR nor CRD");
    int64_t c_out = to_space ? xs[1] / (b * b) : xs[1] * b * b;
    if (out != std::vector<int64_t>{xs[0], c_out, to_space ? xs[2] * b : xs[2] / b, to_space ? xs[3] * b : xs[3] / b})
      return unsupported(node, "its output's shape does not match its input and blocksize");
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      if (!to_space) {
        // Output channel (bi * b + bj) * C + c holds the input's row h * b + bi, column w * b + bj.
        Expr c = Expr(i[1]) % xs[1], bij = Expr(i[1]) / xs[1];
        return x(i[0], c, Expr(i[2]) * b + bij / b, Expr(i[3]) * b + bij % b);
      }
      Expr bi = Expr(i[2]) % b, bj = Expr(i[3]) % b;
      Expr channel = crd ? (Expr(i[1]) * b + bi) * b + bj : (bi * b + bj) * c_out + Expr(i[1]);
      return x(i[0], channel, Expr(i[2]) / b, Expr(i[3]) / b);
    });
  } else if (op == "LRN") {
    // Across channels (GoogLeNet's and AlexNet's as the ONNX model zoo has them): x over
    // (bias + alpha / size * the sum of squares of the channels c - floor((size - 1) / 2) through
    // c + ceil((size - 1) / 2) inside the tensor) ^ beta. The window's terms are written out (a few:
    // 3 or 5), so that the step is elementwise and vectorizes along the rows.
    int64_t size = node.int_attr("size", 0);
    float alpha = node.float_attr("alpha", 1e-4f), beta = node.float_attr("beta", 0.75f), bias = node.float_attr("bias", 1.f);
    constexpr int64_t kMaxWindow = 64;
    if (out.size() < 3 || size < 1 || size > kMaxWindow)
      return unsupported(node, fmt::format("expects [N, C, ...] and a window of 1 to {} channels (size {})", kMaxWindow, size));
    int64_t channels = out[1], below = (size - 1) / 2;
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      std::vector<Expr> at = as_exprs(i);
      Expr sum = f32(0);
      for (int64_t k = -below; k < size - below; ++k) {
        Expr c = Expr(i[1]) + k;
        at[1] = ir::max(ir::min(c, ir::int_imm(channels - 1)), ir::int_imm(0));
        Expr v = x(at);
        Expr inside = ir::logical_and(ir::ge(c, ir::int_imm(0)), ir::lt(c, ir::int_imm(channels)));
        sum = sum + ir::select(inside, v * v, f32(0));
      }
      Expr base = f32(bias) + f32(alpha / static_cast<float>(size)) * sum;
      // base^-0.75 (every model's beta) as two square roots; others as e^(-beta ln base).
      Expr root = ir::call(ir::Type::f32(), "sqrt", {base});
      Expr scale = beta == 0.75f ? f32(1) / (root * ir::call(ir::Type::f32(), "sqrt", {root}))
                                 : ir::call(ir::Type::f32(), "exp", {f32(-beta) * ir::call(ir::Type::f32(), "log", {base})});
      return x(as_exprs(i)) * scale;
    });
  } else if (op == "ArgMax" || op == "ArgMin") {
    // The index of the largest (smallest) value along the axis, the first where several are
    // (the last with select_last_index), held as float32 like every index here (exact to 2^24).
    size_t rank = x.shape().size();
    int64_t a = normalize_axis(node.int_attr("axis", 0), rank);
    if (a < 0) return unsupported(node, fmt::format("axis {} is out of range", node.int_attr("axis", 0)));
    bool keep = node.int_attr("keepdims", 1) != 0, last = node.int_attr("select_last_index", 0) != 0, is_min = op == "ArgMin";
    auto axis = static_cast<size_t>(a);
    int64_t n = x.shape()[axis];
    std::vector<bool> reduced(rank, false);
    reduced[axis] = true;
    auto read = [&](const std::vector<Var>& i, Expr k) {
      Expr v = read_reduced(x, reduced, keep, i, {k});
      return is_min ? f32(0) - v : v;
    };
    auto r = te::reduce_axis(n, "r");
    te::Tensor best = te::compute("best", out, [&](const std::vector<Var>& i) { return te::max_reduce(read(i, r->var), {r}); });
    auto s = te::reduce_axis(n, "s");
    // The largest index that hits, or the negated smallest.
    te::Tensor found = te::compute("found", out, [&](const std::vector<Var>& i) {
      Expr k = ir::cast(ir::Type::f32(), Expr(s->var));
      Expr hit = ir::compare(ir::CompareOp::kEQ, read(i, s->var), best(as_exprs(i)));
      return te::max_reduce(ir::select(hit, last ? k : f32(0) - k, f32(last ? -1.0 : -double(n))), {s});
    });
    result = last ? found : te::compute("out", out, [&](const std::vector<Var>& i) { return f32(0) - found(as_exprs(i)); });
  } else if (op == "CumSum") {
    std::vector<int64_t> axis;
    if (!constant_ints(graph, node, 1, axis) || axis.size() != 1) return unsupported(node, "an axis computed at run time is not supported");
    int64_t a = normalize_axis(axis[0], out.size());
    if (a < 0) return unsupported(node, fmt::format("axis {} is out of range", axis[0]));
    result = cumulative_sum(x, static_cast<size_t>(a), node.int_attr("exclusive", 0) != 0, node.int_attr("reverse", 0) != 0);
  } else if (op == "Tile") {
    const auto& xs = x.shape();
    if (out.size() != xs.size()) return unsupported(node, "its output's rank is not its input's");
    for (size_t d = 0; d < out.size(); ++d)
      if (out[d] % xs[d] != 0) return unsupported(node, "its output is not whole copies of its input");
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      std::vector<Expr> at;
      for (size_t d = 0; d < out.size(); ++d) at.push_back(out[d] == xs[d] ? Expr(i[d]) : Expr(i[d]) % xs[d]);
      return x(at);
    });
  } else if (op == "Transpose") {
    // A Transpose the passes composed with a Gather (passes/compose_movement.h) reads one index of
    // x's axis `select_axis`; its perm is over x's other axes.
    int64_t select = node.attributes.count("select_axis") ? node.int_attr("select_axis", 0) : -1;
    if (select >= static_cast<int64_t>(x.shape().size())) return unsupported(node, "select_axis is out of range");
    size_t rank = x.shape().size() - (select >= 0 ? 1 : 0);
    std::vector<int64_t> perm = transpose_perm(node, rank);
    if (!is_permutation(perm)) return unsupported(node, "perm is not a permutation of the input's axes");
    if (perm.size() != rank) return unsupported(node, "perm does not match the input's rank");
    // The moved axes, x's less the selected one; the output must be them in perm's order (so
    // that every read is inside x, whatever attributes a file gives the node).
    std::vector<int64_t> moved_dims = x.shape();
    int64_t select_index = node.int_attr("select_index", 0);
    if (select >= 0) {
      if (select_index < 0 || select_index >= moved_dims[static_cast<size_t>(select)])
        return unsupported(node, "select_index is out of range");
      moved_dims.erase(moved_dims.begin() + select);
    }
    bool permuted = out.size() == rank;
    for (size_t d = 0; permuted && d < rank; ++d) permuted = out[d] == moved_dims[static_cast<size_t>(perm[d])];
    if (!permuted) return unsupported(node, "its output's shape is not its input's permuted");
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      std::vector<Expr> moved(rank);
      for (size_t d = 0; d < rank; ++d) moved[static_cast<size_t>(perm[d])] = i[d];
      if (select < 0) return x(moved);
      std::vector<Expr> at = moved;
      at.insert(at.begin() + select, ir::int_imm(select_index));
      return x(at);
    });
  } else if (op == "Concat") {
    int64_t axis = node.int_attr("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(out.size());
    if (axis < 0 || axis >= static_cast<int64_t>(out.size())) return unsupported(node, "axis out of range");
    result = concat(in, out, static_cast<size_t>(axis));
  } else {
    TF_ASSIGN_OR_RETURN(result, elementwise(node, in, out, !out_value->is_float));
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
      else y = activation(e, y);
    }
    return y;
  });
  for (const auto& e : epilogues)
    if (e.op != "bias" && e.op != "add" && !is_activation(e.op))
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

Computed reblocked_compute(const Value& from, const std::string& to, int64_t from_block, int64_t block) {
  std::vector<int64_t> d = dims_of(from);
  te::Tensor in = te::placeholder("in", {d[0], d[1] / from_block, d[2], d[3], from_block});
  // Written as [N, C/b, H, W, b/g, g] (the same bytes as NCHW[b]c) with g the blocks' greatest
  // common divisor: a run of g channels never straddles a block of either, so the innermost axis
  // copies g contiguous lanes (a lane's block and offset computed per channel were gathers).
  int64_t g = std::gcd(from_block, block);
  te::Tensor out = te::compute("out", {d[0], d[1] / block, d[2], d[3], block / g, g}, [&](const std::vector<Var>& i) {
    Expr run = Expr(i[1]) * block + Expr(i[4]) * g;
    return in(i[0], run / from_block, i[2], i[3], run % from_block + Expr(i[5]));
  });
  return Computed{ops::ComputeDef{{in}, out}, {from.name, to}};
}

namespace {

// Channels [first, first + out[1]) of `from` in NCHW[block]c, as NCHW of shape `out`.
Computed channels_from_blocks(const Value& from, const std::string& to, int64_t block, int64_t first,
                              const std::vector<int64_t>& out) {
  std::vector<int64_t> d = dims_of(from);
  te::Tensor in = te::placeholder("in", {d[0], d[1] / block, d[2], d[3], block});
  te::Tensor result = te::compute("out", out, [&](const std::vector<Var>& i) {
    Expr c = Expr(i[1]) + first;
    return in(i[0], c / block, i[2], i[3], c % block);
  });
  return Computed{ops::ComputeDef{{in}, result}, {from.name, to}};
}

}  // namespace

Computed from_blocked_compute(const Value& from, const std::string& to, int64_t block) {
  return channels_from_blocks(from, to, block, 0, dims_of(from));
}

StatusOr<Computed> blocked_channel_slice_compute(const Graph& graph, const Node& node, const std::string& in, int64_t block) {
  TF_ASSIGN_OR_RETURN(const Value* x, graph.value_of(node, node.inputs.at(0)));
  TF_ASSIGN_OR_RETURN(const Value* out, graph.value_of(node, node.outputs[0]));
  std::vector<int64_t> xd = dims_of(*x), od = dims_of(*out), starts, axes, steps = {1};
  auto refuse = [&] { return unsupported(node, "not a Slice of a range of channels in channel blocks"); };
  if (xd.size() != 4 || od.size() != 4 || xd[1] % block != 0 || !constant_ints(graph, node, 1, starts) ||
      !constant_ints(graph, node, 3, axes) || (node.inputs.size() > 4 && !constant_ints(graph, node, 4, steps)))
    return refuse();
  if (starts.size() != 1 || axes.size() != 1 || steps != std::vector<int64_t>{1} || normalize_axis(axes[0], 4) != 1)
    return refuse();
  int64_t first = starts[0] < 0 ? starts[0] + xd[1] : starts[0];
  if (first < 0 || first + od[1] > xd[1] || od[0] != xd[0] || od[2] != xd[2] || od[3] != xd[3]) return refuse();
  Value from = *x;
  from.name = in;
  return channels_from_blocks(from, node.outputs[0], block, first, od);
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
    } else if (!is_activation(e.op)) {
      return unsupported(node, fmt::format("epilogue '{}' is not supported", e.op));
    }
  }
  te::Tensor result = te::compute("out", shape, [&](const std::vector<Var>& i) {
    Expr y = in[0](as_exprs(i));
    size_t operand = 1;
    for (const auto& e : epilogues) {
      if (e.op == "bias") y = y + in[operand++](Expr(i[1]) * block + Expr(i[4]));
      else if (e.op == "add") y = y + in[operand++](as_exprs(i));
      else y = activation(e, y);
    }
    return y;
  });
  names.push_back(node.outputs[0]);
  return Computed{ops::ComputeDef{in, result}, names};
}

StatusOr<Computed> blocked_pool_compute(const Graph& graph, const Node& node, const std::string& in, int64_t block) {
  TF_ASSIGN_OR_RETURN(const Value* x_value, graph.value_of(node, node.inputs.at(0)));
  TF_ASSIGN_OR_RETURN(const Value* out_value, graph.value_of(node, node.outputs[0]));
  std::vector<int64_t> xd = dims_of(*x_value), od = dims_of(*out_value);
  std::vector<int64_t> kernel = node.ints_attr("kernel_shape"), strides = node.ints_attr("strides"),
                       pads = node.ints_attr("pads"), dilations = node.ints_attr("dilations");
  if (strides.empty()) strides = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  if (dilations.empty()) dilations = {1, 1};
  bool average = node.op == "AveragePool";
  if (xd.size() != 4 || xd[1] % block != 0 || kernel.size() != 2 || strides.size() != 2 || pads.size() != 4 ||
      dilations.size() != 2 || (average && dilations != std::vector<int64_t>{1, 1}) ||
      (node.attributes.count("auto_pad") && node.attributes.at("auto_pad").s != "NOTSET"))
    return unsupported(node, "not a 2-D max or average pooling of an NCHW tensor in channel blocks");
  int64_t cb = xd[1] / block, h = xd[2], w = xd[3];
  te::Tensor x = te::placeholder("in", {xd[0], cb, h, w, block});
  // The window reads the input through guards (-inf outside) rather than a padded copy of it:
  // loop partitioning takes the guards out of the interior columns, and the copy (a pass over
  // the whole input) took most of the step's time (ResNet-18 at 160: 0.26 ms, ONNX Runtime's
  // pooling 0.06 ms). The guards cover ceil_mode's last windows too, which reach past the padding
  // (GoogLeNet's fourteen max poolings took 2.7 ms in NCHW with the conversions around them, ONNX
  // Runtime's 0.3).
  auto r = te::reduce_axis(kernel[0], "r");
  auto s = te::reduce_axis(kernel[1], "s");
  std::vector<int64_t> shape = {od[0], cb, od[2], od[3], block};
  te::Tensor window = te::compute(average ? "total" : "out", shape, [&](const std::vector<Var>& i) {
    Expr y = i[2] * strides[0] + r->var * dilations[0] - pads[0];
    Expr xx = i[3] * strides[1] + s->var * dilations[1] - pads[1];
    Expr read = pool_read(y, xx, h, w, [&](Expr yc, Expr xc) { return x(i[0], i[1], yc, xc, i[4]); },
                          average ? 0.0 : -std::numeric_limits<float>::infinity());
    return average ? te::sum(read, {r, s}) : te::max_reduce(read, {r, s});
  });
  if (!average) return Computed{ops::ComputeDef{{x}, window}, {in, node.outputs[0]}};
  bool include_pad = node.int_attr("count_include_pad", 0) != 0;
  te::Tensor out = te::compute("out", shape, [&](const std::vector<Var>& i) {
    Expr n = window_count(i[2], strides[0], kernel[0], pads[0], h, pads[2], include_pad) *
             window_count(i[3], strides[1], kernel[1], pads[1], w, pads[3], include_pad);
    return window(as_exprs(i)) / ir::cast(ir::Type::f32(), n);
  });
  return Computed{ops::ComputeDef{{x}, out}, {in, node.outputs[0]}};
}

std::optional<ir::Type> interface_type(const std::string& dtype) {
  if (dtype == "int64") return ir::Type::i64();
  if (dtype == "int32") return ir::Type{ir::ScalarKind::kInt, 32, 1};
  if (dtype == "bool") return ir::Type{ir::ScalarKind::kInt, 8, 1};
  return std::nullopt;
}

StatusOr<Computed> input_cast_compute(const Graph& graph, const std::string& input) {
  const Value* v = graph.find(input);
  if (!v) return invalid_argument(fmt::format("model input '{}' has no known shape", input));
  if (v->dtype == "float32") return Computed{};
  std::optional<ir::Type> type = interface_type(v->dtype);
  if (!type)
    return invalid_argument(
        fmt::format("input '{}' is {}: a built model takes float32, int64, int32 or bool inputs", input, v->dtype));
  te::Tensor in = te::placeholder("in", dims_of(*v), *type);
  te::Tensor out = te::compute("out", dims_of(*v), [&](const std::vector<Var>& i) {
    Expr x = ir::cast(ir::Type::f32(), in(as_exprs(i)));
    if (v->dtype != "bool") return x;
    // Any byte but 0 is true (a C caller's bools need not be 0 and 1): 1.
    return ir::select(ir::lt(x, f32(0)), f32(1), ir::select(ir::ge(x, f32(1)), f32(1), f32(0)));
  });
  return Computed{ops::ComputeDef{{in}, out}, {input, input + "/float32"}};
}

Computed output_cast_compute(const Value& from, const Value& to) {
  // A bool out is 0 or 1: the float32 it was computed as is.
  ir::Type type = interface_type(to.dtype).value_or(ir::Type::i64());
  te::Tensor in = te::placeholder("in", dims_of(from), ir::Type::f32());
  te::Tensor out = te::compute("out", dims_of(to), [&](const std::vector<Var>& i) { return ir::cast(type, in(as_exprs(i))); });
  return Computed{ops::ComputeDef{{in}, out}, {from.name, to.name}};
}


bool is_blockable_elementwise(const std::string& op) {
  static const std::set<std::string> kOps = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean", "PRelu", "Elu", "Selu", "Relu", "Sigmoid", "HardSigmoid",
                                             "HardSwish", "Swish", "LeakyRelu", "Mish", "Tanh", "Neg", "Abs", "Clip",
                                             "Celu", "Shrink", "Softsign", "ThresholdedRelu", "Gelu", "Erf",
                                             "Softplus", "Exp", "Sqrt"};
  return kOps.count(op) > 0;
}

bool is_per_channel(const Value& v, int64_t channels) {
  if (v.elements() != channels || v.shape.size() > 4) return false;
  std::vector<int64_t> d = v.shape;
  while (d.size() < 4) d.insert(d.begin(), 1);
  return d[1] == channels;
}

bool reduces_rows_and_columns(const Graph& graph, const Node& node) {
  if (node.op == "GlobalAveragePool" || node.op == "GlobalMaxPool") return true;
  const Value* x = nullptr;
  std::vector<int64_t> axes;
  if (!reduction_of(graph, node, x, axes) || x->shape.size() != 4) return false;
  for (int64_t& a : axes) a = normalize_axis(a, 4);
  std::sort(axes.begin(), axes.end());
  return axes == std::vector<int64_t>{2, 3};
}

StatusOr<Computed> blocked_elementwise_compute(const Graph& graph, const Node& node, const std::vector<std::string>& inputs,
                                               int64_t block) {
  TF_ASSIGN_OR_RETURN(const Value* out_value, graph.value_of(node, node.outputs[0]));
  std::vector<int64_t> d = dims_of(*out_value);
  if (d.size() != 4 || d[1] % block != 0)
    return unsupported(node, fmt::format("output {} is not NCHW in blocks of {}", shape_string(d), block));
  std::vector<te::Tensor> in;
  std::vector<std::string> names;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TF_ASSIGN_OR_RETURN(const Value* v, graph.value_of(node, node.inputs[i]));
    std::vector<int64_t> shape = dims_of(*v);
    // Fewer dimensions broadcast from the right: a per-channel [C, 1, 1] scale is [1, C, 1, 1].
    while (shape.size() < 4) shape.insert(shape.begin(), 1);
    if (v->elements() == 1) {
      shape = {1};
    } else if (shape.size() != 4 || shape[1] != d[1]) {
      return unsupported(node, fmt::format("input {} does not broadcast over NCHW {} in channel blocks", shape_string(shape),
                                           shape_string(d)));
    } else {
      shape = blocked_shape(shape, block);
    }
    in.push_back(te::placeholder(fmt::format("in{}", i), shape));
    names.push_back(inputs[i]);
  }
  if (in.empty()) return unsupported(node, "has no input");
  std::vector<int64_t> out = blocked_shape(d, block);
  te::Tensor result;
  if (node.op == "Clip") {
    float lo, hi;
    if (!clip_bounds(graph, node, lo, hi)) return unsupported(node, "bounds that are not constants");
    result = te::compute("out", out, [&](const std::vector<Var>& i) {
      return ir::min(ir::max(broadcast_read(in[0], i), f32(lo)), f32(hi));
    });
  } else {
    TF_ASSIGN_OR_RETURN(result, elementwise(node, in, out, false));
  }
  names.push_back(node.outputs[0]);
  return Computed{ops::ComputeDef{in, result}, names};
}

StatusOr<Computed> blocked_transpose_compute(const Graph& graph, const Node& node, const std::string& in, int64_t in_block,
                                             int64_t out_block) {
  TF_ASSIGN_OR_RETURN(const Value* x_value, graph.value_of(node, node.inputs.at(0)));
  TF_ASSIGN_OR_RETURN(const Value* out_value, graph.value_of(node, node.outputs[0]));
  std::vector<int64_t> xd = dims_of(*x_value), od = dims_of(*out_value);
  if (node.attributes.count("select_axis") || xd.size() != 4 || od.size() != 4 || (in_block > 0) == (out_block > 0))
    return unsupported(node, "not a 4-D Transpose from or to channel blocks");
  std::vector<int64_t> perm = transpose_perm(node, 4);
  if (!is_permutation(perm)) return unsupported(node, "perm is not a permutation of the input's axes");
  for (size_t d = 0; d < 4; ++d)
    if (od[d] != xd[static_cast<size_t>(perm[d])]) return unsupported(node, "its output's shape is not its input's permuted");
  if ((in_block > 0 && xd[1] % in_block != 0) || (out_block > 0 && od[1] % out_block != 0))
    return unsupported(node, "its channels do not split into the blocks");
  te::Tensor x = te::placeholder("in", in_block > 0 ? blocked_shape(xd, in_block) : xd);
  // The input's index at output index `o` (logical NCHW coordinates).
  auto moved = [&](const std::vector<Expr>& o) {
    std::vector<Expr> at(4);
    for (size_t d = 0; d < 4; ++d) at[static_cast<size_t>(perm[d])] = o[d];
    return at;
  };
  te::Tensor result;
  if (out_block > 0) {
    result = te::compute("out", blocked_shape(od, out_block), [&](const std::vector<Var>& i) {
      return x(moved({i[0], Expr(i[1]) * out_block + Expr(i[4]), i[2], i[3]}));
    });
  } else if (perm[3] == 1) {
    // The input's channels become the output's last axis: written as [.., C/b, b], so that each
    // vector lane reads the next channel of one block (no division of a lane's index).
    result = te::compute("out", {od[0], od[1], od[2], od[3] / in_block, in_block}, [&](const std::vector<Var>& i) {
      std::vector<Expr> at = moved({i[0], i[1], i[2], ir::int_imm(0)});
      return x(at[0], i[3], at[2], at[3], i[4]);
    });
  } else {
    result = te::compute("out", od, [&](const std::vector<Var>& i) {
      std::vector<Expr> at = moved(as_exprs(i));
      return x(at[0], at[1] / in_block, at[2], at[3], at[1] % in_block);
    });
  }
  return Computed{ops::ComputeDef{{x}, result}, {in, node.outputs[0]}};
}

StatusOr<Computed> blocked_resize_compute(const Graph& graph, const Node& node, const std::string& in, int64_t block) {
  TF_ASSIGN_OR_RETURN(const Value* x_value, graph.value_of(node, node.inputs.at(0)));
  TF_ASSIGN_OR_RETURN(const Value* out_value, graph.value_of(node, node.outputs[0]));
  std::vector<int64_t> xd = dims_of(*x_value), od = dims_of(*out_value);
  if (xd.size() != 4 || xd[1] % block != 0) return unsupported(node, "its input is not NCHW in blocks of its channels");
  te::Tensor x = te::placeholder("in", blocked_shape(xd, block));
  TF_ASSIGN_OR_RETURN(te::Tensor out, resize(graph, node, x, xd, od, block));
  return Computed{ops::ComputeDef{{x}, out}, {in, node.outputs[0]}};
}

StatusOr<Computed> blocked_concat_compute(const Graph& graph, const Node& node, const std::vector<std::string>& inputs,
                                          int64_t block) {
  TF_ASSIGN_OR_RETURN(const Value* out_value, graph.value_of(node, node.outputs[0]));
  std::vector<int64_t> d = dims_of(*out_value);
  int64_t axis = node.int_attr("axis", 0);
  if (d.size() != 4 || (axis != 1 && axis != -3) || inputs.size() != node.inputs.size())
    return unsupported(node, "not a Concat of NCHW tensors along their channels");
  std::vector<te::Tensor> in;
  for (size_t k = 0; k < inputs.size(); ++k) {
    TF_ASSIGN_OR_RETURN(const Value* v, graph.value_of(node, node.inputs[k]));
    std::vector<int64_t> shape = dims_of(*v);
    if (shape.size() != 4 || shape[1] % block != 0) return unsupported(node, "an input's channels are not whole blocks");
    in.push_back(te::placeholder(fmt::format("in{}", k), blocked_shape(shape, block)));
  }
  // In blocks the channel axis counts blocks: the same concatenation along it, a vector per block.
  std::vector<std::string> names = inputs;
  names.push_back(node.outputs[0]);
  return Computed{ops::ComputeDef{in, concat(in, blocked_shape(d, block), 1)}, names};
}

StatusOr<Computed> blocked_spatial_reduce_compute(const Graph& graph, const Node& node, const std::string& in, int64_t block) {
  TF_ASSIGN_OR_RETURN(const Value* x_value, graph.value_of(node, node.inputs.at(0)));
  TF_ASSIGN_OR_RETURN(const Value* out_value, graph.value_of(node, node.outputs[0]));
  std::vector<int64_t> xd = dims_of(*x_value), od = dims_of(*out_value);
  bool keep = node.op.rfind("Global", 0) == 0 || node.int_attr("keepdims", 1) != 0;
  auto refuse = [&] { return unsupported(node, "not a reduction over the rows and columns of an NCHW tensor in channel blocks"); };
  if (!reduces_rows_and_columns(graph, node) || xd.size() != 4 || xd[1] % block != 0) return refuse();
  // Without kept dimensions ([N, C], a classifier's input) the means lie as [N, C, 1, 1] in
  // blocks does: in channel order.
  std::vector<int64_t> kept = {xd[0], xd[1], 1, 1};
  if (od != (keep ? kept : std::vector<int64_t>{xd[0], xd[1]})) return refuse();
  int64_t h = xd[2], w = xd[3];
  te::Tensor x = te::placeholder("in", blocked_shape(xd, block));
  auto r = te::reduce_axis(h, "r");
  auto s = te::reduce_axis(w, "s");
  // One stage where it can be, the scale inside the sum: the sum accumulates in registers, in
  // lanes of the block (ops::plain_schedule), where a stage of sums before the scaling ran scalar
  // through memory (ShuffleNetV2's mean over 1024 channels at 7x7: 0.08 ms, ONNX Runtime's
  // 0.01). L2's square root is a stage after the sum (ConvNeXt V2's global response norm over
  // 160 channels at 40x40 ran its reduction scalar in NCHW: 0.4 ms; ONNX Runtime 0.06).
  const std::string& op = node.op;
  bool mean = op == "ReduceMean" || op == "GlobalAveragePool";
  bool most = op == "ReduceMax" || op == "GlobalMaxPool" || op == "ReduceMin";
  te::Tensor out = te::compute("out", blocked_shape(kept, block), [&](const std::vector<Var>& i) {
    Expr v = reduction_term(op, x(i[0], i[1], r->var, s->var, i[4]));
    if (most) return te::max_reduce(v, {r, s});
    return te::sum(mean ? reduction_result(op, v, double(h * w)) : v, {r, s});
  });
  if (reduction_finishes(op) && !mean)
    out = te::compute("result", blocked_shape(kept, block), [&](const std::vector<Var>& i) {
      return reduction_result(op, out(as_exprs(i)), double(h * w));
    });
  return Computed{ops::ComputeDef{{x}, out}, {in, node.outputs[0]}};
}

Computed copy_compute(const Value& from, const std::string& to) {
  te::Tensor in = te::placeholder("in", dims_of(from));
  te::Tensor out = te::compute("out", dims_of(from), [&](const std::vector<Var>& i) { return in(as_exprs(i)); });
  return Computed{ops::ComputeDef{{in}, out}, {from.name, to}};
}

}  // namespace tunefarm::model
