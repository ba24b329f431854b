// conv2d_nhwc: a 2-D convolution, input [N, H, W, C], weights HWIO [R, S, C, K], output
// [N, P, Q, K], with stride, padding and dilation.
#include "common/operators/operator.h"

namespace tunefarm::operators {

Operator conv2d_nhwc() {
  return conv_operator("conv2d_nhwc",
                       {dim("N"), dim("C"), dim("H"), dim("W"), dim("K"), dim("R"), dim("S"), stride_param(), pad_param(),
                        dilation_param()},
                       ConvLayout::kNHWC, false);
}

}  // namespace tunefarm::operators
