#include "compiler/ops/conv_nchwc.h"

#include <algorithm>
#include <cmath>

namespace tunefarm::ops {

using ir::Expr;
using ir::Var;
using operators::ConvEpilogue;

double epilogue_value(const ConvEpilogue& e, double sum, float bias, float residual) {
  double v = sum + (e.bias ? bias : 0.0) + (e.residual ? residual : 0.0);
  if (e.relu || e.relu6) v = std::max(v, 0.0);
  if (e.relu6) v = std::min(v, 6.0);
  if (e.silu) v = v / (1.0 + std::exp(-v));
  if (e.hardswish) v = v * std::clamp(v / 6.0 + 0.5, 0.0, 1.0);
  return v;
}

te::Tensor epilogue_stage(const ConvEpilogue& e, const te::Tensor& sum, const std::vector<int64_t>& shape,
                          std::vector<te::Tensor>& inputs) {
  if (!e.any()) return sum;
  int64_t block = shape[4];
  te::Tensor bias, residual;
  if (e.bias) inputs.push_back(bias = te::placeholder("bias", {shape[1] * block}));
  if (e.residual) inputs.push_back(residual = te::placeholder("residual", shape));
  return te::compute("output", shape, [&](const std::vector<Var>& v) {
    std::vector<Expr> at(v.begin(), v.end());
    Expr val = sum(at);
    if (e.bias) val = val + bias(Expr(v[1]) * block + v[4]);
    if (e.residual) val = val + residual(at);
    if (e.relu || e.relu6) val = ir::max(val, ir::float_imm(0));
    if (e.relu6) val = ir::min(val, ir::float_imm(6));
    // exp vectorizes (the code generator's inline exponential); one division a vector.
    if (e.silu) val = val / (ir::float_imm(1) + ir::call(ir::Type::f32(), "exp", {ir::float_imm(0) - val}));
    if (e.hardswish) val = val * ir::min(ir::max(val * ir::float_imm(1.0 / 6) + ir::float_imm(0.5), ir::float_imm(0)), ir::float_imm(1));
    return val;
  }, {"n", "cb", "p", "q", "c"});
}

Read5 guarded_read(const te::Tensor& in, int64_t H, int64_t W, int64_t pad, bool past_the_end) {
  return [in, H, W, pad, past_the_end](Expr n, Expr c, Expr h, Expr w, Expr ci) -> Expr {
    if (pad == 0 && !past_the_end) return in(n, c, h, w, ci);
    Expr hh = h - pad, ww = w - pad;
    Expr inside = ir::logical_and(ir::logical_and(ir::ge(hh, ir::int_imm(0)), ir::lt(hh, ir::int_imm(H))),
                                  ir::logical_and(ir::ge(ww, ir::int_imm(0)), ir::lt(ww, ir::int_imm(W))));
    Expr hc = ir::min(ir::max(hh, ir::int_imm(0)), ir::int_imm(H - 1));
    Expr wc = ir::min(ir::max(ww, ir::int_imm(0)), ir::int_imm(W - 1));
    return ir::select(inside, in(n, c, hc, wc, ci), ir::float_imm(0));
  };
}

std::vector<te::Tensor> conv_inputs(const te::Tensor& input, const te::Tensor& weight,
                                    const std::vector<te::Tensor>& epilogue_inputs) {
  std::vector<te::Tensor> args = {input, weight};
  args.insert(args.end(), epilogue_inputs.begin(), epilogue_inputs.end());
  return args;
}

std::vector<te::Tensor> kernel_args(const te::Tensor& input, const te::Tensor& weight,
                                    const std::vector<te::Tensor>& epilogue_inputs, const te::Tensor& out) {
  std::vector<te::Tensor> args = conv_inputs(input, weight, epilogue_inputs);
  args.push_back(out);
  return args;
}

te::Tensor local_sum(schedule::Schedule& s, const te::Tensor& sum, const te::Tensor& out) {
  if (sum.op == out.op) return s.cache_write(out, ir::MemScope::kLocal);
  s[sum].set_scope(ir::MemScope::kLocal);
  return sum;
}

}  // namespace tunefarm::ops
