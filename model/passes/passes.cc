#include "model/passes/passes.h"

#include "model/passes/compose_movement.h"
#include "model/passes/decompose.h"
#include "model/passes/fold_batch_norm.h"
#include "model/passes/fold_constants.h"
#include "model/passes/fuse_patterns.h"
#include "model/passes/fuse_row_inputs.h"
#include "model/passes/group_epilogues.h"
#include "model/passes/pad_channels.h"
#include "model/passes/unary_before_views.h"

namespace tunefarm::model {

Status run_passes(Graph& graph) {
  // 1. Data movement around constants (a transposed Linear weight, a reshaped Constant) becomes
  //    constants, so that the next passes and the tunable operators see weights as weights.
  TF_RETURN_IF_ERROR(fold_constants(graph).status());
  // 2. A BatchNormalization after a Conv becomes the Conv's scaled weight and bias.
  TF_RETURN_IF_ERROR(fold_batch_norm(graph).status());
  // 3. What the build runs as simpler operators becomes them: Split as Slices, a grouped Conv over
  //    a batch larger than one as one Conv per group, Einsum in attention's forms as Transpose and
  //    MatMul.
  TF_RETURN_IF_ERROR(decompose(graph).status());
  //    Chains of Transposes and Gathers of one index become one Transpose, which copies once
  //    (attention's q, k and v; the Transposes decompose wrote compose too).
  TF_RETURN_IF_ERROR(compose_movement(graph).status());
  // 4. The node chains exporters spell LayerNorm and GELU with become one node each.
  TF_RETURN_IF_ERROR(fuse_patterns(graph).status());
  //    A unary step after a 1-D convolution's Reshape back from its one-row map runs on the map,
  //    in the convolution's channel blocks (the GELUs of audio front ends).
  TF_RETURN_IF_ERROR(unary_before_views(graph).status());
  // 5. A residual Add before a LayerNorm, attention's scale and mask before a Softmax, join it;
  //    before the epilogues, which would take the residual Add into the GEMM before it.
  TF_RETURN_IF_ERROR(fuse_row_inputs(graph).status());
  // 6. Convolutions over channel counts no vector block divides take them padded with zero
  //    channels to whole vectors, through the steps after them that treat channels alone.
  TF_RETURN_IF_ERROR(pad_channels(graph).status());
  // 7. Bias, residual Add and activations after a tunable operator join it as its epilogue; last,
  //    so that they follow the folded bias and the fused activations.
  return group_epilogues(graph).status();
}

}  // namespace tunefarm::model
