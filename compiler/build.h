// The compiler's public build API, what the tuner (and tests and benchmarks) call. LLVM-free.
//
//   build_kernel(workload, target, config)  -> a loadable artifact: a shared object implementing
//       the kernel ABI of compiler/runtime/kernel_runtime.h (CPU targets) or PTX with its launch
//       dimensions (CUDA), plus its entry symbol and tensor argument specs;
//   build_reference_kernel(workload, target) -> the same for the naive, obviously correct schedule
//       that the device agent runs to check candidates;
//   templates, config spaces, default configs, FLOP counts and the naive C++ reference per op.
//
// Every input is validated: a bad workload, an unknown operator, a dtype the operator does not
// support, a config for another template or target, or a config outside its space is an
// INVALID_ARGUMENT error that says what is wrong.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "common/target.h"
#include "common/workload.h"
#include "compiler/codegen/codegen.h"
#include "compiler/ir/ir.h"
#include "compiler/ops/op.h"
#include "compiler/ops/space.h"

namespace tunefarm {

struct BuiltKernel {
  enum class Format { kSharedObject, kPtx };
  Format format = Format::kSharedObject;
  std::string binary;  // Shared-object bytes, or PTX text.
  std::string entry;
  std::vector<ops::TensorArg> args;  // In ABI order: inputs, then the output.
  std::array<int64_t, 3> grid{1, 1, 1}, block{1, 1, 1};  // CUDA only.
  std::string template_name;  // Empty for the reference kernel.
};

inline constexpr const char* kKernelEntry = "tunefarm_kernel";

StatusOr<BuiltKernel> build_kernel(const Workload& workload, const Target& target, const Config& config);
StatusOr<BuiltKernel> build_reference_kernel(const Workload& workload, const Target& target);

// The lowered loop IR of a candidate, and of the reference kernel (for features, inspection and
// tests).
StatusOr<ir::LoweredFunc> lower_candidate(const Workload& workload, const Target& target, const Config& config);
StatusOr<ir::LoweredFunc> lower_reference(const Workload& workload, const Target& target);

// The candidate's fixed-length feature vector (compiler/features), for the cost model.
StatusOr<std::vector<float>> candidate_features(const Workload& workload, const Target& target, const Config& config);

// Objects for libraries (compiler/library.h, the model build): a config's kernel, or the compute
// definition of an operator that is not tuned (elementwise, pooling, softmax, ...) with a plain
// schedule, as a position-independent object whose entry (the kernel ABI) is named `entry`.
StatusOr<std::string> build_kernel_object(const Workload& workload, const Target& target, const Config& config,
                                          const std::string& entry);
// `vectorize` and `parallel` as in ops::plain_schedule.
StatusOr<std::string> build_compute_object(const ops::ComputeDef& def, const Target& target, const std::string& entry,
                                           bool vectorize = false, bool parallel = true);

// A candidate compiled into this process (host targets only): quick checks without a linker.
StatusOr<std::unique_ptr<codegen::JitKernel>> jit_kernel(const Workload& workload, const Config& config);

// Operator and template lookup; errors name the known alternatives. A template that does not
// accept the workload (ops::Template::accepts) is an error saying why, and is not among the names.
StatusOr<const ops::OpDef*> lookup_op(const Workload& workload);
StatusOr<const ops::Template*> lookup_template(const Workload& workload, const Target& target, const std::string& name);
std::vector<std::string> template_names(const Workload& workload, const Target& target);
StatusOr<ops::ConfigSpace> config_space(const Workload& workload, const Target& target, const std::string& template_name = "");
StatusOr<Config> default_config(const Workload& workload, const Target& target);
// The config with its outer loop split over the kernel runtime's threads, where its template has a
// `parallel` knob: records are measured on one thread, where "none" and "outer" run alike, and a
// program that runs the kernel decides the thread count (with one, the loop runs inline).
Config with_outer_parallelism(Config config);
// The same with the knob "outer" where `parallel`, else "none" (the loop runs on the calling thread).
Config with_parallelism(Config config, bool parallel);

// `config` with `parallel` as the builds set it for `workload` (parallel_pays below): the kernel a
// model or a kernel library runs, which candidates are measured as; and that knob's value.
Config as_built(const Workload& workload, Config config);
std::string parallel_as_built(const Workload& workload);
// Whether a step of a program (a model's) repays running its loop on the kernel runtime's threads:
// whether its work, `flops` operations or `bytes` of its arguments read and written, is large
// beside the cost of a fork/join. A step below it runs on one thread whatever the thread count.
bool parallel_pays(double flops, double bytes);
// The same for a workload's kernel (its FLOPs, its arguments' bytes) and for a compute
// definition, which counts its arguments' bytes only (the steps outside the templates stream
// their data: elementwise, pooling, normalization).
bool parallel_pays(const Workload& workload);
bool parallel_pays(const ops::ComputeDef& def);
StatusOr<double> workload_flops(const Workload& workload);
StatusOr<std::vector<ops::TensorArg>> kernel_args(const Workload& workload);
// Runs the naive C++ reference: inputs in argument order, output sized for the last argument.
Status run_reference(const Workload& workload, const std::vector<const float*>& inputs, float* output);

}  // namespace tunefarm
