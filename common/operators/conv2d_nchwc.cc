// conv2d_nchwc: a channel-blocked convolution (TVM's conv2d_NCHWc, oneDNN's nChw16c): input
// [N, C/ic, H, W, ic], weights packed OIHW[ic]i[oc]o [K/oc, C/ic, R, S, ic, oc], output
// [N, K/oc, P, Q, oc], with an epilogue applied in the output stage: a bias per output channel, a
// residual tensor of the output's shape and layout, then ReLU, ReLU6, SiLU or HardSwish.
// `winograd=M` (2 or 4; 3x3 windows at stride 1 only): the same convolution computed as Winograd's
// F(MxM, 3x3), its weights arriving transformed (common/operators/winograd.h) as
// [M+2, M+2, K/oc, C, oc], transformed once by whoever holds them (a model build).
#include "common/operators/operator.h"

namespace tunefarm::operators {

Operator conv2d_nchwc() {
  return conv_operator("conv2d_nchwc",
                       {dim("N"), dim("C"), dim("H"), dim("W"), dim("K"), dim("R"), dim("S"), stride_param(), pad_param(),
                        dilation_param(), block_param("ic_block"), block_param("oc_block"), flag("bias"),
                        flag("residual"), flag("relu"), flag("relu6"), flag("silu"), flag("hardswish"),
                        winograd_param()},
                       ConvLayout::kNCHWc, false);
}

}  // namespace tunefarm::operators
