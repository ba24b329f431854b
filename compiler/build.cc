#include "compiler/build.h"

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
      if (t.target_kind == target.kind) out.push_back(t.name);
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
  return t;
}

StatusOr<ops::ConfigSpace> config_space(const Workload& workload, const Target& target, const std::string& template_name) {
  TF_ASSIGN_OR_RETURN(const ops::Template* t, lookup_template(workload, target, template_name));
  return t->space(workload);
}

StatusOr<Config> default_config(const Workload& workload, const Target& target) {
  TF_ASSIGN_OR_RETURN(const ops::Template* t, lookup_template(workload, target, ""));
  return t->default_config(workload);
}

StatusOr<double> workload_flops(const Workload& workload) {
  TF_ASSIGN_OR_RETURN(const ops::OpDef* op, lookup_op(workload));
  return op->flops(workload);
}

StatusOr<std::vector<ops::TensorArg>> kernel_args(const Workload& workload) {
  TF_ASSIGN_OR_RETURN(const ops::OpDef* op, lookup_op(workload));
  return op->args(workload);
}

Status run_reference(const Workload& workload, const std::vector<const float*>& inputs, float* output) {
  TF_ASSIGN_OR_RETURN(const ops::OpDef* op, lookup_op(workload));
  if (inputs.size() + 1 != op->args(workload).size())
    return invalid_argument(fmt::format("{} takes {} inputs, got {}", workload.op, op->args(workload).size() - 1, inputs.size()));
  op->reference(workload, inputs, output);
  return Status();
}

namespace {

StatusOr<ir::LoweredFunc> candidate_loops(const Workload& workload, const Target& target, const Config& config) {
  TF_ASSIGN_OR_RETURN(const ops::Template* t, lookup_template(workload, target, config.template_name));
  ops::ConfigSpace space = t->space(workload);
  TF_RETURN_IF_ERROR(space.check(config).with_context("config for " + t->name));
  TF_ASSIGN_OR_RETURN(Config full, space.complete(config));
  auto f = t->build(workload, full, kKernelEntry);
  if (!f.ok()) return f.status().with_context(fmt::format("{} with {}", t->name, config.to_json()));
  return f;
}

}  // namespace

StatusOr<ir::LoweredFunc> lower_candidate(const Workload& workload, const Target& target, const Config& config) {
  TF_ASSIGN_OR_RETURN(ir::LoweredFunc loops, candidate_loops(workload, target, config));
  return lower::finish_lowering(std::move(loops));
}

StatusOr<std::vector<float>> candidate_features(const Workload& workload, const Target& target, const Config& config) {
  TF_ASSIGN_OR_RETURN(ir::LoweredFunc loops, candidate_loops(workload, target, config));
  return features::extract_features(loops);
}

namespace {

StatusOr<BuiltKernel> finish(const ir::LoweredFunc& f, const Workload& workload, const Target& target, std::string template_name) {
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

// Every output element computed by one GPU thread: the reference schedule for CUDA targets.
StatusOr<ir::LoweredFunc> naive_cuda(const ops::ComputeDef& def) {
  schedule::Schedule s({def.output});
  auto& st = s[def.output];
  te::IterVar fused = st.axis(0);
  for (size_t d = 1; d < def.output.shape().size(); ++d) fused = st.fuse(fused, st.axis(d));
  auto [bx, tx] = st.split(fused, 64);
  st.bind(bx, "blockIdx.x");
  st.bind(tx, "threadIdx.x");
  // Intermediate stages of the definition run per output element too.
  for (const auto& stage : s.stages()) {
    if (stage->op() == def.output.op || stage->op()->kind == te::OperationNode::Kind::kPlaceholder) continue;
    stage->compute_at(st, tx);
  }
  return lower::lower(s, def.args(), kKernelEntry);
}

}  // namespace

StatusOr<BuiltKernel> build_kernel(const Workload& workload, const Target& target, const Config& config) {
  TF_ASSIGN_OR_RETURN(ir::LoweredFunc f, lower_candidate(workload, target, config));
  return finish(f, workload, target, config.template_name);
}

StatusOr<ir::LoweredFunc> lower_reference(const Workload& workload, const Target& target) {
  TF_ASSIGN_OR_RETURN(const ops::OpDef* op, lookup_op(workload));
  ops::ComputeDef def = op->compute(workload);
  return target.kind == Target::Kind::kCUDA ? naive_cuda(def) : ops::build_naive(def, kKernelEntry);
}

StatusOr<BuiltKernel> build_reference_kernel(const Workload& workload, const Target& target) {
  TF_ASSIGN_OR_RETURN(ir::LoweredFunc f, lower_reference(workload, target));
  return finish(f, workload, target, "");
}

StatusOr<std::unique_ptr<codegen::JitKernel>> jit_kernel(const Workload& workload, const Config& config) {
  Target host;
  TF_ASSIGN_OR_RETURN(ir::LoweredFunc f, lower_candidate(workload, host, config));
  TF_ASSIGN_OR_RETURN(std::string obj, codegen::compile_object(f, host, kKernelEntry));
  return codegen::JitKernel::create(obj, kKernelEntry);
}

}  // namespace tunefarm
