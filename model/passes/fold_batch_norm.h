// Folds a BatchNormalization that follows a convolution into the convolution's weights and bias,
// as inference engines do: y = gamma * (conv(x) - mean) / sqrt(var + eps) + beta is a convolution
// with each output channel's filter scaled by gamma / sqrt(var + eps) and a bias. One that follows
// anything else (DenseNet's BN before ReLU) becomes that per-channel scale and shift: Mul, Add.
#pragma once

#include "common/status.h"
#include "model/graph.h"

namespace tunefarm::model {

// Folds every BatchNormalization whose input is a Conv with constant weights read by nothing else,
// and writes every other one with constant parameters as Mul + Add; answers how many were either.
StatusOr<int> fold_batch_norm(Graph& graph);

}  // namespace tunefarm::model
