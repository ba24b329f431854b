// Internal to ops/: what the channel-blocked convolution's files share (conv_nchwc.cc: the direct
// templates and blocked_conv_ops(); conv_winograd.cc: Winograd's definition and template): the
// epilogue of their output stage, as the references compute it and as a stage, guarded reads of a
// blocked input, their kernels' arguments (defined in conv_nchwc_shared.cc); and what
// conv_winograd.cc adds to conv2d_nchwc.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/operators/conv.h"
#include "compiler/ir/ir.h"
#include "compiler/ops/op.h"
#include "compiler/schedule/schedule.h"
#include "compiler/te/tensor.h"

namespace tunefarm::ops {

// out = act(sum + bias[k] + residual[...]), act ReLU, ReLU6, SiLU or HardSwish (a network's Conv,
// its BatchNormalization folded into the bias, a residual Add and the activation in one pass), as
// the references compute it.
double epilogue_value(const operators::ConvEpilogue& e, double sum, float bias, float residual);

// The output stage over `sum` [N, C/b, P, Q, b]: the sum itself when there is no epilogue.
// `inputs` receives the epilogue's placeholders in argument order.
te::Tensor epilogue_stage(const operators::ConvEpilogue& e, const te::Tensor& sum, const std::vector<int64_t>& shape,
                          std::vector<te::Tensor>& inputs);

// The register tiles' bounds the validators of the blocked convolutions' spaces keep to: vector
// registers the accumulators may take (of 32 on AVX-512; the rest hold the weights and the
// broadcast inputs), and FMAs in a fully unrolled loop body (conv_nchwc.cc says why).
inline constexpr int64_t kMaxAccVectors = 28;
inline constexpr int64_t kMaxUnrolledFmas = 128;
// Vectors of 16 lanes (AVX-512) that `lanes` channels take.
inline int64_t vectors(int64_t lanes) { return (lanes + 15) / 16; }

using Read5 = std::function<ir::Expr(ir::Expr, ir::Expr, ir::Expr, ir::Expr, ir::Expr)>;

// A read of a blocked input [N, C/x, H, W, x] at padded coordinates (h, w): zero outside the input,
// with the coordinates clamped so that the load itself stays in bounds. Without padding the reads
// are not guarded unless `past_the_end` says they may run past the input's last row or column
// (Winograd's tiles at the bottom and right edges).
Read5 guarded_read(const te::Tensor& in, int64_t H, int64_t W, int64_t pad, bool past_the_end = false);

// A blocked convolution's inputs in argument order: input, weight, then the epilogue's.
std::vector<te::Tensor> conv_inputs(const te::Tensor& input, const te::Tensor& weight,
                                    const std::vector<te::Tensor>& epilogue_inputs);
// The same with the output last: the kernel's arguments.
std::vector<te::Tensor> kernel_args(const te::Tensor& input, const te::Tensor& weight,
                                    const std::vector<te::Tensor>& epilogue_inputs, const te::Tensor& out);

// The register tile of sums: the output's own stage kept in registers when there is no epilogue
// (as before epilogues existed, so old configs build the same kernel), else the sum stage.
te::Tensor local_sum(schedule::Schedule& s, const te::Tensor& sum, const te::Tensor& out);

// conv2d_nchwc with winograd=m (conv_winograd.cc): the reference (Winograd's formula in double,
// from the transformed weight), the compute definition, and the template
// conv2d_nchwc.cpu.winograd.
void winograd_reference(const Workload& w, const std::vector<const float*>& in, float* out);
ComputeDef winograd_compute(const Workload& w);
Template winograd_template();

}  // namespace tunefarm::ops
