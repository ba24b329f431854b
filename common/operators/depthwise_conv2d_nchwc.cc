// depthwise_conv2d_nchwc: one filter per channel, channels in blocks: input [N, C/b, H, W, b],
// weights [C/b, R, S, b], output [N, C/b, P, Q, b], with conv2d_nchwc's epilogue (bias, residual,
// ReLU, ReLU6, SiLU or HardSwish).
#include "common/operators/operator.h"

namespace tunefarm::operators {

Operator depthwise_conv2d_nchwc() {
  return conv_operator("depthwise_conv2d_nchwc",
                       {dim("N"), dim("C"), dim("H"), dim("W"), dim("R"), dim("S"), stride_param(), pad_param(),
                        dilation_param(), block_param("block"), flag("bias"), flag("residual"), flag("relu"),
                        flag("relu6"), flag("silu"), flag("hardswish")},
                       ConvLayout::kNCHWc, true);
}

}  // namespace tunefarm::operators
