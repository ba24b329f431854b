// The convolution family's shape (conv2d_nchw, conv2d_nhwc, depthwise_conv2d_nchw, conv2d_nchwc,
// depthwise_conv2d_nchwc) and what its descriptions share.
#pragma once

#include <cstdint>
#include <vector>

#include "common/operators/types.h"
#include "common/status.h"
#include "common/workload.h"

namespace tunefarm::operators {

// The epilogues a channel-blocked convolution applies in its output stage, in this order: a bias
// per output channel, a residual tensor of the output's shape and layout, then one activation:
// ReLU, ReLU6, SiLU (x * sigmoid(x), EfficientNet's) or HardSwish (MobileNetV3's).
struct ConvEpilogue {
  bool bias = false, residual = false, relu = false, relu6 = false, silu = false, hardswish = false;
  bool any() const { return bias || residual || relu || relu6 || silu || hardswish; }
};

enum class ConvLayout {
  kNCHW,   // activations NCHW; weights OIHW, or C1HW when depthwise
  kNHWC,   // activations NHWC; weights HWIO
  kNCHWc,  // activations NCHW[x]c; weights OIHW[x]i[y]o, or CHW[x]c when depthwise
};

struct ConvShape {
  ConvLayout layout = ConvLayout::kNCHW;
  bool nhwc = false;       // layout == kNHWC
  bool depthwise = false;  // one filter per channel: K == C, no reduction over channels
  int64_t N = 0, C = 0, H = 0, W = 0, K = 0, R = 0, S = 0, stride = 1, pad = 0, dil = 1;
  int64_t P = 0, Q = 0;    // output rows and columns
  // Channels per block of the input (ic) and of the output (oc) when blocked (both the one block
  // of a depthwise one); 0 otherwise.
  int64_t ic = 0, oc = 0;
  ConvEpilogue epilogue;   // Blocked ones only.
  // Winograd's output tile m of F(m x m, 3x3) when the blocked convolution is computed that way
  // (its weight transformed: winograd.h); 0 for a direct convolution.
  int64_t winograd = 0;

  bool blocked() const { return layout == ConvLayout::kNCHWc; }
  int64_t cb() const { return C / ic; }  // input-channel blocks
  int64_t kb() const { return K / oc; }  // output-channel blocks
  int64_t alpha() const { return winograd + 2; }  // the transformed tile's side, m + 3 - 1
  int64_t tiles_p() const { return (P + winograd - 1) / winograd; }  // Winograd tiles down the output
  int64_t tiles_q() const { return (Q + winograd - 1) / winograd; }  // and across it
};

// The parameters a convolution has beside its dimensions, with their ranges and defaults.
ParamSpec stride_param();
ParamSpec pad_param();
ParamSpec dilation_param();
// Channels per block of a blocked layout (NCHW[x]c).
ParamSpec block_param(const char* name);
// Winograd's output tile (conv2d_nchwc): 0 (direct, not printed), 2 or 4.
ParamSpec winograd_param();

// Reads a parsed convolution workload: N, C, H, W, K (C when depthwise), R, S, stride, pad,
// dilation, and when blocked its blocks (ic_block and oc_block, or block) and epilogue flags.
ConvShape read_conv(const Workload& w, ConvLayout layout, bool depthwise);

// The output extent of a convolution along one dimension: the positions of a kernel of `kernel`
// taps, `dilation` apart, over `input` elements padded by `pad` on both sides, every `stride`.
inline int64_t conv_output_extent(int64_t input, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  return (input + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1;
}

// The tensors' shapes in the convolution's layout.
std::vector<int64_t> conv_input_shape(const ConvShape& c);
std::vector<int64_t> conv_weight_shape(const ConvShape& c);
std::vector<int64_t> conv_output_shape(const ConvShape& c);

// A padding no smaller than the dilated kernel or a kernel larger than the padded input (an empty
// output); blocks that do not divide the channels; ReLU and ReLU6 together.
Status check_conv(const ConvShape& c);
// input, weight, then a blocked one's epilogue operands (bias [K], residual like the output), then
// the output.
std::vector<TensorArg> conv_args(const ConvShape& c);
double conv_flops(const ConvShape& c);
// C*R*S, or R*S when depthwise, or C*alpha^4 when computed as Winograd's (its transforms written
// out).
int64_t conv_reduction_length(const ConvShape& c);

}  // namespace tunefarm::operators
