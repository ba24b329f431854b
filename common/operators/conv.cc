#include "common/operators/conv.h"

#include <fmt/format.h>

namespace tunefarm::operators {

ParamSpec stride_param() { return {"stride", false, 1, 1, 64, true}; }
ParamSpec pad_param() { return {"pad", false, 0, 0, 1024, true}; }
ParamSpec dilation_param() { return {"dilation", false, 1, 1, 64, false}; }
ParamSpec block_param(const char* name) { return {name, true, 0, 1, 64, true}; }
ParamSpec winograd_param() { return {"winograd", false, 0, 0, 4, false}; }

ConvShape read_conv(const Workload& w, ConvLayout layout, bool depthwise) {
  ConvShape c;
  c.layout = layout;
  c.nhwc = layout == ConvLayout::kNHWC;
  c.depthwise = depthwise;
  c.N = w.param("N"), c.C = w.param("C"), c.H = w.param("H"), c.W = w.param("W");
  c.K = depthwise ? c.C : w.param("K");
  c.R = w.param("R"), c.S = w.param("S");
  c.stride = w.param("stride"), c.pad = w.param("pad"), c.dil = w.param("dilation");
  c.P = conv_output_extent(c.H, c.R, c.stride, c.pad, c.dil);
  c.Q = conv_output_extent(c.W, c.S, c.stride, c.pad, c.dil);
  if (c.blocked()) {
    c.ic = depthwise ? w.param("block") : w.param("ic_block");
    c.oc = depthwise ? w.param("block") : w.param("oc_block");
    c.epilogue = {w.param("bias") != 0, w.param("residual") != 0, w.param("relu") != 0,
                  w.param("relu6") != 0, w.param("silu") != 0, w.param("hardswish") != 0};
    if (!depthwise) c.winograd = w.param("winograd");
  }
  return c;
}

std::vector<int64_t> conv_input_shape(const ConvShape& c) {
  switch (c.layout) {
    case ConvLayout::kNHWC: return {c.N, c.H, c.W, c.C};
    case ConvLayout::kNCHWc: return {c.N, c.cb(), c.H, c.W, c.ic};
    case ConvLayout::kNCHW: break;
  }
  return {c.N, c.C, c.H, c.W};
}

std::vector<int64_t> conv_weight_shape(const ConvShape& c) {
  if (c.winograd > 0) return {c.alpha(), c.alpha(), c.kb(), c.C, c.oc};
  if (c.blocked()) return c.depthwise ? std::vector<int64_t>{c.cb(), c.R, c.S, c.ic} : std::vector<int64_t>{c.kb(), c.cb(), c.R, c.S, c.ic, c.oc};
  if (c.depthwise) return {c.C, 1, c.R, c.S};
  return c.nhwc ? std::vector<int64_t>{c.R, c.S, c.C, c.K} : std::vector<int64_t>{c.K, c.C, c.R, c.S};
}

std::vector<int64_t> conv_output_shape(const ConvShape& c) {
  switch (c.layout) {
    case ConvLayout::kNHWC: return {c.N, c.P, c.Q, c.K};
    case ConvLayout::kNCHWc: return {c.N, c.kb(), c.P, c.Q, c.oc};
    case ConvLayout::kNCHW: break;
  }
  return {c.N, c.K, c.P, c.Q};
}

Status check_conv(const ConvShape& c) {
  int64_t eff_r = c.dil * (c.R - 1) + 1, eff_s = c.dil * (c.S - 1) + 1;
  if (c.pad >= eff_r || c.pad >= eff_s)
    return invalid_argument(fmt::format("pad={} must be smaller than the dilated kernel ({}x{})", c.pad, eff_r, eff_s));
  if (c.H + 2 * c.pad < eff_r || c.W + 2 * c.pad < eff_s)
    return invalid_argument(fmt::format(
        "kernel {}x{} (dilated) is larger than the padded input {}x{}: the output would be empty", eff_r, eff_s,
        c.H + 2 * c.pad, c.W + 2 * c.pad));
  if (!c.blocked()) return Status();
  const ConvEpilogue& e = c.epilogue;
  if (int(e.relu) + int(e.relu6) + int(e.silu) + int(e.hardswish) > 1)
    return invalid_argument("relu=1, relu6=1, silu=1 and hardswish=1 exclude each other (one activation)");
  if (c.depthwise && c.C % c.ic != 0)
    return invalid_argument(fmt::format("C={} must be a multiple of block={}", c.C, c.ic));
  if (!c.depthwise && (c.C % c.ic != 0 || c.K % c.oc != 0))
    return invalid_argument(
        fmt::format("C={} and K={} must be multiples of ic_block={} and oc_block={}", c.C, c.K, c.ic, c.oc));
  if (c.winograd != 0 && c.winograd != 2 && c.winograd != 4)
    return invalid_argument(fmt::format("winograd={}: the output tile is 2 or 4 (F(2x2,3x3), F(4x4,3x3))", c.winograd));
  if (c.winograd != 0 && (c.R != 3 || c.S != 3 || c.stride != 1 || c.dil != 1))
    return invalid_argument(fmt::format("winograd={} computes 3x3 windows at stride 1 without dilation (this is {}x{}, "
                                        "stride {}, dilation {})", c.winograd, c.R, c.S, c.stride, c.dil));
  return Status();
}

std::vector<TensorArg> conv_args(const ConvShape& c) {
  std::string act, weight;
  if (c.blocked()) {
    act = fmt::format("NCHW{}c", c.ic);
    weight = c.depthwise ? fmt::format("CHW{}c", c.ic)
             : c.winograd > 0 ? fmt::format("WINO{}OI{}o", c.alpha(), c.oc)
                              : fmt::format("OIHW{}i{}o", c.ic, c.oc);
  } else {
    act = c.nhwc ? "NHWC" : "NCHW";
    weight = c.depthwise ? "C1HW" : c.nhwc ? "HWIO" : "OIHW";
  }
  TensorArg output{"output", conv_output_shape(c), DType::kFloat32, true, c.blocked() ? fmt::format("NCHW{}c", c.oc) : act};
  std::vector<TensorArg> args = {{"input", conv_input_shape(c), DType::kFloat32, false, act},
                                 TensorArg::weight("weight", conv_weight_shape(c), weight)};
  if (c.epilogue.bias) args.push_back(TensorArg::weight("bias", {c.K}));
  if (c.epilogue.residual) args.push_back({"residual", output.shape, DType::kFloat32, false, output.layout});
  args.push_back(output);
  return args;
}

double conv_flops(const ConvShape& c) { return 2.0 * c.N * c.K * c.P * c.Q * (c.depthwise ? 1 : c.C) * c.R * c.S; }

int64_t conv_reduction_length(const ConvShape& c) {
  // A Winograd output is a sum of C * alpha^4 products once its transforms are written out, the
  // transforms scaling them by up to 10 and 8 per dimension, and it rounds accordingly: with the
  // random weights of the correctness check, F(4x4, 3x3)'s outputs near zero were up to 2.7 times
  // further from the double reference than the tolerance of C*9 products allows (64 to 512
  // channels), and within a quarter of the tolerance of C*alpha^4.
  if (c.winograd > 0) return c.C * c.alpha() * c.alpha() * c.alpha() * c.alpha();
  return (c.depthwise ? 1 : c.C) * c.R * c.S;
}

}  // namespace tunefarm::operators
