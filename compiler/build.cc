#include "compiler/build.h"

#include "compiler/codegen/codegen.h"

#include <algorithm>
#include <variant>

#include <fmt/format.h>

#include "compiler/features/features.h"
#include "compiler/lower/lower.h"
#include "compiler/schedule/schedule.h"

namespace tunefarm {

StatusOr<const ops::OpDef*> lookup_op(const Workload& workload) {
  TF_RETURN_IF_ERROR(validate_workload(workload).with_context("workload '" + workload.to_string() + "'"));
  const ops::OpDef* op = ops::find_op(workload.op);
  if (!op) return invalid_argument(fmt::format("the compiler has no operator '{}'", workload.op));
  if (workload.dtype != DType::kFloat32)
    return invalid_argument(fmt::format("operator {} is implemented for float32 only, not {}", workload.op,
                                        dtype_name(workload.dtype)));
  return op;
}

std::vector<std::string> template_names(const Workload& workload, const Target& target) {
  std::vector<std::string> out;
  if (const ops::OpDef* op = ops::find_op(workload.op))
    for (const auto& t : op->templates)
      if (t.target_kind == target.kind && (!t.accepts || t.accepts(workload).ok())) out.push_back(t.name);
  return out;
}

StatusOr<const ops::Template*> lookup_template(const Workload& workload, const Target& target, const std::string& name) {
  TF_ASSIGN_OR_RETURN(const ops::OpDef* op, lookup_op(workload));
  const ops::Template* t = name.empty() ? ops::default_template(*op, target, workload) : ops::find_template(*op, name);
  if (!t)
    return invalid_argument(fmt::format("operator {} has no template '{}' (for target '{}': {})", workload.op, name,
                                        target.to_string(), fmt::join(template_names(workload, target), ", ")));
  if (t->target_kind != target.kind)
    return invalid_argument(fmt::format("template {} is not for target '{}' (templates for it: {})", t->name,
                                        target.to_string(), fmt::join(template_names(workload, target), ", ")));
  if (t->accepts) {
    Status accepted = t->accepts(workload);
    if (!accepted.ok())
      return invalid_argument(fmt::format("{} (templates for this workload: {})", accepted.message(),
                                          fmt::join(template_names(workload, target), ", ")));
  }
  return t;
}

StatusOr<ops::ConfigSpace> config_space(const Workload& workload, const Target& target, const std::string& template_name) {
  TF_ASSIGN_OR_RETURN(const ops::Template* t, lookup_template(workload, target, template_name));
  return t->space(workload);
}

Config with_outer_parallelism(Config config) { return with_parallelism(std::move(config), true); }

namespace {
std::string parallel_knob(bool parallel) { return parallel ? "outer" : "none"; }
}  // namespace

Config with_parallelism(Config config, bool parallel) {
  for (auto& [name, value] : config.knobs)
    if (name == "parallel" && std::holds_alternative<std::string>(value)) value = parallel_knob(parallel);
  return config;
}

Config as_built(const Workload& workload, Config config) {
  return with_parallelism(std::move(config), parallel_pays(workload));
}

std::string parallel_as_built(const Workload& workload) { return parallel_knob(parallel_pays(workload)); }

bool parallel_pays(double flops, double bytes) {
  // A fork/join of the kernel runtime on 2 threads cost 2-4 us above half the work's single-thread
  // time, for 2-10 us of work (an AMD EPYC 2-vCPU guest at load ~7, the pool's workers spinning
  // between launches; where the other core is busy it costs up to a time slice). A step is worth
  // splitting where its single-thread time is at least 20 us, about 8 fork/joins: a step of 1
  // MFLOP at ~50 GFLOP/s, or 800 KB at ~40 GB/s, the speeds of a model's steps on one thread (a
  // step reads what the one before wrote, from the cache: MobileNetV2-small's steps of ~200 KB,
  // split, made the model 0.050 -> 0.062-0.072 ms on 2 threads).
  constexpr double kFlopsPerUs = 50e3, kBytesPerUs = 40e3, kMinWorkUs = 20;
  return std::max(flops / kFlopsPerUs, bytes / kBytesPerUs) >= kMinWorkUs;
}

namespace {

double bytes_of(const std::vector<std::vector<int64_t>>& shapes) {
  double bytes = 0;
  for (const auto& shape : shapes) {
    double n = 4;  // float32
    for (int64_t d : shape) n *= static_cast<double>(d);
    bytes += n;
  }
  return bytes;
}

}  // namespace

bool parallel_pays(const Workload& workload) {
  if (!lookup_op(workload).ok()) return false;
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& a : operators::tensor_args(workload)) shapes.push_back(a.shape);
  return parallel_pays(operators::flops(workload), bytes_of(shapes));
}

bool parallel_pays(const ops::ComputeDef& def) {
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& t : def.args()) shapes.push_back(t.shape());
  return parallel_pays(0, bytes_of(shapes));
}

StatusOr<Config> default_config(const Workload& workload, const Target& target) {
  TF_ASSIGN_OR_RETURN(const ops::Template* t, lookup_template(workload, target, ""));
  return t->default_config(workload, codegen::cpu_model(target));
}

StatusOr<double> workload_flops(const Workload& workload) {
  TF_RETURN_IF_ERROR(lookup_op(workload).status());
  return operators::flops(workload);
}

StatusOr<std::vector<ops::TensorArg>> kernel_args(const Workload& workload) {
  TF_RETURN_IF_ERROR(lookup_op(workload).status());
  return operators::tensor_args(workload);
}

Status run_reference(const Workload& workload, const std::vector<const float*>& inputs, float* output) {
  TF_ASSIGN_OR_RETURN(const ops::OpDef* op, lookup_op(workload));
  size_t args = operators::tensor_args(workload).size();
  if (inputs.size() + 1 != args)
    return invalid_argument(fmt::format("{} takes {} inputs, got {}", workload.op, args - 1, inputs.size()));
  op->reference(workload, inputs, output);
  return Status();
}

// The pipeline every kernel goes through, in this order:
//   1. schedule         the template applies the config (ops/), or the operator's reference
//                       schedule: a te schedule and the kernel's arguments;
//   2. loop nest        bound inference, storage planning, the annotated loop nest, storage
//                       flattening, GPU barriers (lower/);
//   3. finishing passes tail handling, unrolling, vectorization, simplification (lower/);
//   4. features         read from the annotated loop nest of stage 2, for the cost model;
//   5. code generation  LLVM: an object linked into a shared object, or PTX (codegen/).
namespace {

// 1. Schedule.
StatusOr<ops::Scheduled> candidate_schedule(const Workload& workload, const Target& target, const Config& config) {
  TF_ASSIGN_OR_RETURN(const ops::Template* t, lookup_template(workload, target, config.template_name));
  ops::ConfigSpace space = t->space(workload);
  TF_RETURN_IF_ERROR(space.check(config).with_context("config for " + t->name));
  TF_ASSIGN_OR_RETURN(Config full, space.complete(config));
  auto scheduled = t->schedule(workload, full);
  if (!scheduled.ok()) return scheduled.status().with_context(fmt::format("{} with {}", t->name, config.to_json()));
  return scheduled;
}

StatusOr<ops::Scheduled> reference_schedule(const Workload& workload, const Target& target) {
  TF_ASSIGN_OR_RETURN(const ops::OpDef* op, lookup_op(workload));
  return ops::reference_schedule(op->compute(workload), target.kind);
}

// 2. Loop nest.
StatusOr<ir::LoopNest> loop_nest(const ops::Scheduled& scheduled) {
  return lower::lower_loops(*scheduled.schedule, scheduled.args, kKernelEntry);
}

// 5. Code generation.
StatusOr<BuiltKernel> generate(const ir::LoweredFunc& f, const Workload& workload, const Target& target,
                               std::string template_name) {
  BuiltKernel k;
  k.entry = kKernelEntry;
  k.template_name = std::move(template_name);
  TF_ASSIGN_OR_RETURN(k.args, kernel_args(workload));
  if (target.kind == Target::Kind::kCUDA) {
    TF_ASSIGN_OR_RETURN(codegen::PtxKernel ptx, codegen::compile_ptx(f, target, k.entry));
    k.format = BuiltKernel::Format::kPtx;
    k.binary = std::move(ptx.ptx);
    k.grid = ptx.grid;
    k.block = ptx.block;
    return k;
  }
  TF_ASSIGN_OR_RETURN(std::string obj, codegen::compile_object(f, target, k.entry));
  TF_ASSIGN_OR_RETURN(k.binary, codegen::link_shared_object(obj, target));
  return k;
}

}  // namespace

StatusOr<ir::LoweredFunc> lower_candidate(const Workload& workload, const Target& target, const Config& config) {
  TF_ASSIGN_OR_RETURN(ops::Scheduled scheduled, candidate_schedule(workload, target, config));  // 1
  TF_ASSIGN_OR_RETURN(ir::LoopNest loops, loop_nest(scheduled));                                // 2
  return lower::finish_lowering(std::move(loops));                                             // 3
}

StatusOr<std::vector<float>> candidate_features(const Workload& workload, const Target& target, const Config& config) {
  TF_ASSIGN_OR_RETURN(ops::Scheduled scheduled, candidate_schedule(workload, target, config));  // 1
  TF_ASSIGN_OR_RETURN(ir::LoopNest loops, loop_nest(scheduled));                                // 2
  return features::extract_features(loops);                                                    // 4
}

StatusOr<BuiltKernel> build_kernel(const Workload& workload, const Target& target, const Config& config) {
  TF_ASSIGN_OR_RETURN(ir::LoweredFunc f, lower_candidate(workload, target, config));  // 1-3
  return generate(f, workload, target, config.template_name);                         // 5
}

StatusOr<ir::LoweredFunc> lower_reference(const Workload& workload, const Target& target) {
  TF_ASSIGN_OR_RETURN(ops::Scheduled scheduled, reference_schedule(workload, target));  // 1
  TF_ASSIGN_OR_RETURN(ir::LoopNest loops, loop_nest(scheduled));                        // 2
  return lower::finish_lowering(std::move(loops));                                     // 3
}

StatusOr<BuiltKernel> build_reference_kernel(const Workload& workload, const Target& target) {
  TF_ASSIGN_OR_RETURN(ir::LoweredFunc f, lower_reference(workload, target));  // 1-3
  return generate(f, workload, target, "");                                   // 5
}

StatusOr<std::string> build_kernel_object(const Workload& workload, const Target& target, const Config& config,
                                          const std::string& entry) {
  TF_ASSIGN_OR_RETURN(ir::LoweredFunc f, lower_candidate(workload, target, config));  // 1-3
  return codegen::compile_object(f, target, entry);                                   // 5
}

StatusOr<std::string> build_compute_object(const ops::ComputeDef& def, const Target& target, const std::string& entry,
                                           bool vectorize, bool parallel) {
  if (target.kind != Target::Kind::kLLVM) return unimplemented("operators outside the templates are built for CPUs only");
  ops::Scheduled scheduled = ops::plain_schedule(def, vectorize, parallel);                    // 1
  TF_ASSIGN_OR_RETURN(ir::LoopNest loops, lower::lower_loops(*scheduled.schedule, scheduled.args, entry));  // 2
  ir::LoweredFunc f = lower::finish_lowering(std::move(loops));                                         // 3
  return codegen::compile_object(f, target, entry);                                                     // 5
}

StatusOr<std::unique_ptr<codegen::JitKernel>> jit_kernel(const Workload& workload, const Config& config) {
  Target host;
  TF_ASSIGN_OR_RETURN(ir::LoweredFunc f, lower_candidate(workload, host, config));
  TF_ASSIGN_OR_RETURN(std::string obj, codegen::compile_object(f, host, kKernelEntry));
  return codegen::JitKernel::create(obj, kKernelEntry);
}

}  // namespace tunefarm
