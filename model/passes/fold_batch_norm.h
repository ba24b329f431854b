// Folds a BatchNormalization that follows a convolution into the convolution's weights and bias,
// as inference engines do: y = gamma * (conv(x) - mean) / sqrt(var + eps) + beta is a convolution
// with each output channel's filter scaled by gamma / sqrt(var + eps) and a bias.
#pragma once

#include "common/status.h"
#include "model/graph.h"

namespace tunefarm::model {

// Folds every BatchNormalization whose input is a Conv with constant weights read by nothing else;
// answers how many were folded.
StatusOr<int> fold_batch_norm(Graph& graph);

}  // namespace tunefarm::model
