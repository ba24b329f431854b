// The compute definitions of what a built model runs besides its tuned kernels: the operators that
// are not tuning tasks (elementwise arithmetic with broadcasting, activations, Softmax, layer
// normalization, GELU, pooling, Transpose, Concat) and the epilogues left over from a tuned
// operator (bias, residual add, ReLU, clip). Each is a te definition over placeholders shaped like
// the node's inputs, in the node's input order; compiler/build.h compiles it with a plain schedule.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/ops/op.h"
#include "model/graph.h"

namespace tunefarm::model {

// True for the operators whose output is their input's storage under another shape.
bool is_view(const std::string& op);

// True for the operators whose definition computes statistics of rows across the row's lanes
// (Softmax, the normalizations, a reduction of the last axis alone): the plain schedule vectorizes
// them, where other reductions run scalar.
bool is_row_wise(const Graph& graph, const Node& node);

// True for a reduction over axes that do not include the last (ConvNeXt V2's norm over the rows
// and columns of a channels-last map): the plain schedule vectorizes it along the last axis, each
// lane a sum of its own, reading whole vectors of the input.
bool reduces_along_last_axis_lanes(const Graph& graph, const Node& node);

// A definition with the values it reads and writes, in its argument order (the output last).
struct Computed {
  ops::ComputeDef def;
  std::vector<std::string> tensors;
};

// The definition of `node`; an error names the node and what is not supported.
StatusOr<Computed> operator_compute(const Graph& graph, const Node& node);

// `epilogues` applied to `pre` (a tuned kernel's output: shaped like `node`'s output, or in
// NCHW[pre_block]c when pre_block > 0), written to the node's output.
StatusOr<Computed> epilogue_compute(const Graph& graph, const Node& node, const std::string& pre,
                                    const std::vector<Epilogue>& epilogues, int64_t pre_block = 0);

// NCHW value `from` as NCHW[block]c value `to`, for a channel-blocked convolution; and back.
// Values keep their logical NCHW shape in the graph: the layout is the program's to know.
Computed to_blocked_compute(const Value& from, const std::string& to, int64_t block);
Computed from_blocked_compute(const Value& from, const std::string& to, int64_t block);
// `from`, held in NCHW[from_block]c, in NCHW[block]c: one pass where NCHW and back were two
// (GhostNet's modules concatenate blocks of 8 or 24 that the next convolution reads in 16s).
Computed reblocked_compute(const Value& from, const std::string& to, int64_t from_block, int64_t block);

// A Slice of a range of channels (step 1) of a value in NCHW[block]c, written in NCHW in one pass:
// a padded convolution's channels without its padding (model/passes/pad_channels.h), a split in
// halves. An error where the node is no such Slice.
StatusOr<Computed> blocked_channel_slice_compute(const Graph& graph, const Node& node, const std::string& in, int64_t block);

// `epilogues` applied in NCHW[block]c: `pre` and the node's output both blocked, a bias read by
// channel, an added tensor read from `operands` (the blocked names of the epilogues' operands that
// are tensors, in order).
StatusOr<Computed> blocked_epilogue_compute(const Graph& graph, const Node& node, const std::string& pre,
                                            const std::vector<Epilogue>& epilogues,
                                            const std::vector<std::string>& operands, int64_t block);

// A MaxPool or AveragePool node over its input kept in NCHW[block]c (`in`), written in the same
// blocks: the window runs over rows and columns, a vector over the block's channels.
StatusOr<Computed> blocked_pool_compute(const Graph& graph, const Node& node, const std::string& in, int64_t block);

// The elementwise operators a step can run over NCHW[b]c values as they are (arithmetic with
// broadcasting, activations, Clip): a convolution's output feeds them without leaving its blocks.
bool is_blockable_elementwise(const std::string& op);

// Whether `v` holds one value per channel of an NCHW tensor of `channels` as broadcasting reads it:
// [C, 1, 1] or [1, C, 1, 1] (a [C] broadcasts along the columns instead).
bool is_per_channel(const Value& v, int64_t channels);

// Whether `node` reduces an NCHW tensor over its rows and columns: GlobalAveragePool,
// GlobalMaxPool, or a ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceL1, ReduceL2 or
// ReduceSumSquare over axes 2 and 3 (with or without kept dimensions).
bool reduces_rows_and_columns(const Graph& graph, const Node& node);

// Elementwise `node` over NCHW[block]c: `inputs` names the values the step reads for the node's
// operands (Clip: the first only), each blocked as [N, C/b, H, W, b] — a per-channel tensor
// [N, C, 1, 1] (or [C, 1, 1]) broadcasts over rows and columns: a constant one is read as it is
// stored, which is its blocks too — or of one element (a scalar). The output is
// written in the same blocks. An error where an operand does not broadcast so.
StatusOr<Computed> blocked_elementwise_compute(const Graph& graph, const Node& node, const std::vector<std::string>& inputs,
                                               int64_t block);

// A 4-D Transpose node between channel blocks and another layout, in one step: its input `in`
// kept in NCHW[in_block]c, or its output written in NCHW[out_block]c (exactly one of the blocks is
// nonzero). ConvNeXt moves every block's activations to channels-last for its LayerNorm and back:
// a conversion beside each of those Transposes doubled the data they move.
StatusOr<Computed> blocked_transpose_compute(const Graph& graph, const Node& node, const std::string& in, int64_t in_block,
                                             int64_t out_block);

// Resize or Upsample of a value kept in NCHW[block]c (`in`), written in the same blocks: YOLO's and
// the feature pyramids' upsampling between blocked convolutions, a vector of channels per pixel.
StatusOr<Computed> blocked_resize_compute(const Graph& graph, const Node& node, const std::string& in, int64_t block);

// A Concat along the channels of NCHW[block]c values (`inputs`, each a whole number of blocks),
// written in the same blocks: DenseNet's growing feature map stays in its convolutions' blocks.
StatusOr<Computed> blocked_concat_compute(const Graph& graph, const Node& node, const std::vector<std::string>& inputs,
                                          int64_t block);

// A reduction over the rows and columns (reduces_rows_and_columns) of `in` kept in NCHW[block]c,
// written as [N, C/b, 1, 1, b]: the window's terms accumulate in the lanes of the block.
StatusOr<Computed> blocked_spatial_reduce_compute(const Graph& graph, const Node& node, const std::string& in, int64_t block);

// The element type a model's input or output of `dtype` other than float32 is passed in: int64,
// int32, or bool as a byte; nullopt for the types a built model does not take or give.
std::optional<ir::Type> interface_type(const std::string& dtype);

// Model input `input` converted to float32 (value "<input>/float32") when the caller passes it
// as integers (int64 or int32) or booleans (a byte each); no tensors when it is float32 already.
// Integers are exact in float32 up to 2^24 (token ids, masks, positions). An error for an element
// type a built model does not take.
StatusOr<Computed> input_cast_compute(const Graph& graph, const std::string& input);

// Value `from` (float32) converted into integer or boolean model output `to` (int64, int32, or
// bool as a byte): the labels of an ArgMax or a comparison's result, which the model computes as
// float32, exact up to 2^24.
Computed output_cast_compute(const Value& from, const Value& to);

// A copy of value `from` into `to` (a graph output that is a view of another value).
Computed copy_compute(const Value& from, const std::string& to);

}  // namespace tunefarm::model
