// The tuning tasks of an imported model: each tunable operator (after the passes) as a workload
// string, deduplicated, with how often it occurs and its share of the model's FLOPs — what a
// model's tuning job spreads its trials over, and what `tune-client tasks` shows.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/workload.h"
#include "model/graph.h"

namespace tunefarm::model {

struct Task {
  Workload workload;
  int count = 0;              // Nodes of the model that are this workload.
  double flops = 0;           // Of one occurrence.
  double share = 0;           // count x flops over the sum of that over all tasks.
  std::vector<std::string> nodes;
  // Set when this task is another way to compute the task of that workload (its canonical
  // string): a convolution as Winograd's. It is tuned beside it; a built model takes whichever of
  // the two measured faster, and its FLOPs are not counted twice in `total_flops`.
  std::string alternative_of;
};

struct TaskTable {
  std::vector<Task> tasks;                  // Largest share first.
  std::map<std::string, int> untuned_ops;   // Operator -> nodes that are not tuning tasks.
  int tunable_nodes = 0;                    // Conv, Gemm and MatMul nodes (the counts sum to it).
  double total_flops = 0;
  // The built model's steps that are not tasks' kernels (row-wise steps, leftover epilogues,
  // layout conversions, copies), and the bytes they read and write in all: what a latency
  // estimate from the tasks' figures misses. `other_streaming_bytes` is the part of
  // `other_bytes` that steps of plain arithmetic read and write in order (streams_its_bytes).
  int other_steps = 0;
  double other_bytes = 0;
  double other_streaming_bytes = 0;
  // What one run of the built model touches: the constants its steps read (a convolution that
  // has a Winograd form counted with its weight transformed, the larger), its arena and its
  // inputs and outputs. A model's candidates are timed with their constants rotated through this
  // many bytes (measure/cpu_runner.cc), what a step finds in the caches inside the model.
  double run_bytes = 0;
};

// The block a channel-blocked tensor keeps `channels` in: vectors of 16 where 16 divides them;
// otherwise the first of 40, 44, 24 and 8 that does (MobileNetV3's 72 as 24, 120 as 40, 88 as 44).
// 0: the channels stay unblocked (the passes pad such counts where convolutions read them,
// model/passes/pad_channels.h).
int64_t channel_block(int64_t channels);

// Whether a step of the built model that is not a task's kernel, of operator `op` (Step::op),
// streams its bytes in order with plain arithmetic (elementwise arithmetic, pooling): such steps
// run at about the CPU's stream speed, where row-wise steps with exponentials or square roots and
// transposes run at a fraction of it (the model's latency estimate, common/wire/wire.h).
bool streams_its_bytes(const std::string& op);

// The workload one tunable node computes, or an error naming the node and what is not supported.
StatusOr<Workload> workload_of(const Graph& graph, const Node& node);

// The other form a model may compute a workload in: a channel-blocked 3x3 convolution at stride 1
// as Winograd's F(4x4, 3x3) from 12x12 outputs up to 256 channels each way, F(2x2, 3x3) from 8x8
// or over more channels (conv2d_nchwc winograd=m):
// below, the tiles are few (at 5x5 and 7x7 the transformed weights, 1.8-4x the direct ones,
// stream from memory for four to sixteen tiles, and the direct kernel skips the padding's taps).
// nullopt for every other workload. Which form runs is measured where it can be: extract_tasks
// makes the form a task beside the direct one, and a build takes the faster
// (tuner/library_builder.h); a build with records of neither takes the form where its default is
// known to win (common/operators/winograd.h winograd_by_default).
std::optional<Workload> winograd_form(const Workload& w);

// The forms a build computes workloads in where they are not their own (the key is the canonical
// string of the workload a node computes): a dense layer's workload without its weight panels
// (a record from before weights were packed at build time), a convolution's Winograd form.
using WorkloadForms = std::map<std::string, Workload>;

// The groups of a grouped convolution that runs as one step (RegNet, ResNeXt: several channels per
// group, a batch of one, so that each group's channels are one range of the input, the weight and
// the output): its workload is one group's convolution, called once per group. 1 for every other
// node (a grouped convolution of a larger batch is written as one Conv per group by the passes).
int64_t grouped_conv_groups(const Graph& graph, const Node& node);

// How a built model calls the kernel of a tunable node: the workload, the values it takes in the
// workload's argument order (its output last: the node's output, or `pre_epilogue` when epilogues
// or a layout conversion remain), the epilogues the kernel applies itself (a dense layer's bias and
// ReLU; a blocked convolution's bias, residual add and ReLU/ReLU6, their operands after the weight),
// and the epilogues left to apply after it — a Conv's own bias input first.
struct TunedCall {
  Workload workload;
  std::vector<std::string> tensors;
  // A dense layer's constant weight in the layout its kernel takes, made once when the model is
  // built (tensors[1] names it): MatMul's [K, N] transposed to dense's [N, K], or either packed
  // into the workload's column panels (w_block).
  std::string dense_weight;          // The node's weight value; empty when the kernel reads it as it is.
  bool dense_weight_kn = false;      // The node's weight is [K, N] (MatMul, Gemm with transB=0).
  std::vector<Epilogue> remaining;   // Applied by a step of their own, in order.
  // A channel-blocked convolution (conv2d_nchwc): its input converted to NCHW[input_block]c and
  // its weight packed to OIHW[input_block]i[output_block]o (tensors[0] and [1] name them), and its
  // output, in NCHW[output_block]c, converted back by the epilogue step. 0 for NCHW.
  int64_t input_block = 0;
  int64_t output_block = 0;
  // Where in `tensors` a fused residual add's operand is (it is read in the output's blocks); 0
  // when the kernel adds none.
  size_t residual_index = 0;
  // A grouped convolution's kernel is called `groups` times, each of `tensors` advanced by its
  // `group_strides` elements from one group to the next (empty when groups is 1).
  int64_t groups = 1;
  std::vector<int64_t> group_strides;
};
// `forms`: workloads built in another form (a dense layer's without panels takes W[N, K]; a
// convolution's Winograd form takes its weight transformed).
StatusOr<TunedCall> tuned_call_of(const Graph& graph, const Node& node, const WorkloadForms& forms = {});

// Runs the passes (model/passes/passes.h) and extracts the tasks; a model with a node the build
// cannot run is refused, naming every such node (model/program.h check_buildable).
StatusOr<TaskTable> extract_tasks(Graph& graph);

}  // namespace tunefarm::model
