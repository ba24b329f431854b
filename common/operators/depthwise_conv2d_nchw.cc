// depthwise_conv2d_nchw: one filter per channel, input [N, C, H, W], weights [C, 1, R, S], output
// [N, C, P, Q], with stride, padding and dilation.
#include "common/operators/operator.h"

namespace tunefarm::operators {

Operator depthwise_conv2d_nchw() {
  return conv_operator("depthwise_conv2d_nchw",
                       {dim("N"), dim("C"), dim("H"), dim("W"), dim("R"), dim("S"), stride_param(), pad_param(),
                        dilation_param()},
                       ConvLayout::kNCHW, true);
}

}  // namespace tunefarm::operators
