// The operator library: what the compiler adds to each operator's description
// (common/operators/: parameters, typed shape, checks, tensor arguments, FLOPs): its compute
// definition, an independent naive C++ reference, a naive schedule (the "reference kernel" the
// agent checks candidates against), and its tunable templates, each with its config space and a
// heuristic default config. One file per family of templates: gemm.cc (matmul, dense,
// batch_matmul: CPU and CUDA), conv.cc (conv2d_nchw, conv2d_nhwc, depthwise_conv2d_nchw: CPU and
// CUDA), conv_nchwc.cc (conv2d_nchwc, depthwise_conv2d_nchwc: CPU) with conv_winograd.cc
// (conv2d_nchwc's winograd=m workloads: CPU), which share conv_nchwc.h; op_library() collects them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "common/operators/operator.h"
#include "common/status.h"
#include "common/target.h"
#include "common/workload.h"
#include "compiler/ir/ir.h"
#include "compiler/ops/cpu_model.h"
#include "compiler/ops/space.h"
#include "compiler/schedule/schedule.h"
#include "compiler/te/tensor.h"

namespace tunefarm::ops {

using operators::TensorArg;

// The compute definition of one workload: kernel arguments in order (inputs, then the output).
struct ComputeDef {
  std::vector<te::Tensor> inputs;
  te::Tensor output;
  std::vector<te::Tensor> args() const {
    auto a = inputs;
    a.push_back(output);
    return a;
  }
};

// A schedule ready to lower, with the kernel's arguments in order: what a template makes of a
// config, and the reference schedule of an operator. The schedule is held by pointer because its
// stages point back to it.
struct Scheduled {
  std::unique_ptr<schedule::Schedule> schedule;
  std::vector<te::Tensor> args;
};

struct Template {
  std::string name;  // "<op>.<cpu|cuda>.<variant>"
  Target::Kind target_kind;
  std::function<ConfigSpace(const Workload&)> space;
  // The untuned config: sized by the target CPU's vectors and caches (ignored by CUDA templates).
  std::function<Config(const Workload&, const CpuModel&)> default_config;
  // Applies a config that `space(w).check(config)` accepted: the schedule that compiler/build.cc
  // then lowers and compiles.
  std::function<StatusOr<Scheduled>(const Workload&, const Config&)> schedule;
  // Whether this template is the natural default for a workload (e.g. a GEMV-shaped dense);
  // unset means "for any workload".
  std::function<bool(const Workload&)> preferred;
  // Whether the template can compute a workload at all, and if not why (a direct convolution's
  // template cannot take a Winograd workload's transformed weight); unset means it can compute
  // every workload of its operator.
  std::function<Status(const Workload&)> accepts;
};

struct OpDef {
  std::string name;  // The operator's, as its description (common/operators/) names it.
  // inputs[i] holds operators::tensor_args(w)[i]'s elements (row-major), output the last argument's.
  std::function<void(const Workload&, const std::vector<const float*>& inputs, float* output)> reference;
  std::function<ComputeDef(const Workload&)> compute;
  std::vector<Template> templates;
};

const std::vector<OpDef>& op_library();
const OpDef* find_op(std::string_view name);
const Template* find_template(const OpDef& op, std::string_view name);
// The first template for the target's kind that accepts and prefers the workload, else the first
// one that accepts it.
const Template* default_template(const OpDef& op, const Target& target, const Workload& workload);

// The reference kernel's schedule, slow but obviously correct: on CPUs, every stage as it comes
// without annotations (serial loops over the full tensors); on CUDA, one thread per output element
// computing every intermediate stage it needs. Sums accumulate in double on both, so that the
// reference's own rounding is far below what the check tolerates (te/widen_reductions.h).
Scheduled reference_schedule(const ComputeDef& def, Target::Kind kind);

// The schedule of an operator nobody tunes (a model's elementwise, pooling or normalization step):
// every stage at the root, in order; with `parallel`, the output's outermost axis longer than one
// runs in parallel (fused with the next ones where it is short), so that such steps use the threads
// the tuned kernels use. A row-wise step (every other stage of the output's rows: softmax, layer
// normalization) computes them inside the output's loop over rows instead. With `vectorize`, the output's innermost axis runs in vectors of 16, inside the
// output's reduction if it has one, and so do the other stages' (a row-wise step's statistics,
// one value per row, excepted; the caller knows the body vectorizes).
Scheduled plain_schedule(const ComputeDef& def, bool vectorize = false, bool parallel = true);

// The panel width a model packs a dense layer's constant weight to when it is built (its workload's
// w_block): the register tile's columns of the packed CPU template's default on `cpu`, so that
// the default and every tuned config of that workload read the panels where they lie. 0 for a
// layer of four rows or fewer, whose default template reads W[N, K] along its rows.
int64_t dense_weight_block(int64_t m, int64_t n, int64_t k, const CpuModel& cpu);

// The per-family definitions, collected by op_library().
std::vector<OpDef> gemm_ops();
std::vector<OpDef> conv_ops();
std::vector<OpDef> blocked_conv_ops();

}  // namespace tunefarm::ops
