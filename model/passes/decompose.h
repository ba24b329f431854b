// Writes operators a built model runs as several ones as those ones, so that the rest of the
// pipeline (tasks, lowering) knows one form each:
//   Split            becomes one Slice per output (ShuffleNet's channel split, Swin's chunks);
//   a Conv padded unevenly or by auto_pad SAME (TensorFlow's models) becomes a Pad and a Conv that
//                    pads nothing (even SAME padding: the Conv's explicit pads); a MaxPool's or
//                    AveragePool's auto_pad becomes its explicit pads;
//   1-D Conv         (audio front ends) becomes Pad, Reshape to one row, a 2-D Conv of a 1 x k
//                    kernel, Reshape back;
//   grouped Conv     (RegNet, ResNeXt: groups of several channels) over a batch larger than one
//                    becomes one Conv per group over a Slice of its channels, then a Concat: each
//                    group is an ordinary convolution tuned once for all of them (a batch of one
//                    stays one node whose step calls that kernel per group; depthwise convolutions
//                    keep their own template);
//   Einsum           in the forms attention and linear layers use (one contracted index, one of
//                    each operand's own, any shared batch indices) becomes Transpose + MatMul;
//   ConvTranspose    whose windows do not overlap (stride = kernel, no padding: U-Net's up
//                    convolutions) becomes a MatMul of each pixel's channels by the weight, its
//                    products placed by Reshape and Transpose, then the bias (other ConvTransposes
//                    run as a step of their own);
//   Attention        (opsets 23, 24) becomes the nodes of attention as exporters wrote it before:
//                    heads split, K and V heads repeated for grouped queries, MatMul, scale,
//                    mask (Where or Add; is_causal's triangle added), Softmax, MatMul, heads merged;
//   GroupNormalization  (opsets 18 and 21) becomes Reshape to [N, groups, rest], a
//                    LayerNormalization of each row, Reshape back, Mul by the scale and Add the
//                    bias per channel (the TorchScript exporter's spelling of GroupNorm).
#pragma once

#include "common/status.h"
#include "model/graph.h"

namespace tunefarm::model {

// Answers how many nodes were decomposed.
StatusOr<int> decompose(Graph& graph);

}  // namespace tunefarm::model
