// Pads the channels of convolutions whose channel counts no vector block divides (ShuffleNetV2's
// 58, 116 and 232; 8 channels of a vector of 16 and odd counts otherwise run in NCHW or half
// empty vectors), and of large counts in blocks of 24, 40 or 44 (SqueezeNet's 1000), with zero
// channels up to a multiple of 16, as oneDNN's blocked layouts do: a 1x1
// convolution 58->58 at 28x28 took 0.068 ms in NCHW, 0.027 ms as 64->64 in blocks of 16, its
// padding included; a 3x3 depthwise one over 116 at 14x14 0.012 ms, 0.002 ms over 128.
//
// The padded channels hold zeros or, after an activation, finite values: every convolution that
// reads them has zero weights for them, and they flow only through steps that treat each channel
// on its own (activations, scalings by constants, pooling, adds of tensors padded alike). Every
// other reader (a Concat, a Split, a channel shuffle, a model output) reads the channels the model
// has, sliced out of the padded tensor; a convolution whose input is not padded reads it padded
// with zeros first.
#pragma once

#include "common/status.h"
#include "model/graph.h"

namespace tunefarm::model {

// The channel count a convolution's channels are padded to (a multiple of 16), or `channels`
// itself where they are not padded.
int64_t padded_channels(int64_t channels);

// Pads the channels of every convolution whose input or output channel count padded_channels
// widens; answers how many convolutions were padded.
StatusOr<int> pad_channels(Graph& graph);

}  // namespace tunefarm::model
