// conv2d_nchw: a 2-D convolution, input [N, C, H, W], weights OIHW [K, C, R, S], output
// [N, K, P, Q], with stride, padding and dilation.
#include "common/operators/operator.h"

namespace tunefarm::operators {

Operator conv2d_nchw() {
  return conv_operator("conv2d_nchw",
                       {dim("N"), dim("C"), dim("H"), dim("W"), dim("K"), dim("R"), dim("S"), stride_param(), pad_param(),
                        dilation_param()},
                       ConvLayout::kNCHW, false);
}

}  // namespace tunefarm::operators
