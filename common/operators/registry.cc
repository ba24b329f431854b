#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "common/operators/operator.h"

namespace tunefarm::operators {

const std::vector<Operator>& all_operators() {
  static const std::vector<Operator> kOperators = {
      matmul(),
      dense(),
      batch_matmul(),
      conv2d_nchw(),
      conv2d_nhwc(),
      depthwise_conv2d_nchw(),
      conv2d_nchwc(),
      depthwise_conv2d_nchwc(),
  };
  return kOperators;
}

const Operator* find_operator(std::string_view name) {
  for (const auto& op : all_operators())
    if (op.name == name) return &op;
  return nullptr;
}

namespace {

// Callers hold parsed workloads; an unknown operator here is a bug in the caller, not bad input.
const Operator& known(const Workload& w) {
  const Operator* op = find_operator(w.op);
  if (!op) {
    fmt::print(stderr, "operator description asked for '{}', which is no operator\n", w.op);
    std::abort();
  }
  return *op;
}

}  // namespace

bool is_gemm(const Workload& w) {
  const Operator* op = find_operator(w.op);
  return op && std::holds_alternative<GemmShape>(op->shape(w));
}

bool is_conv(const Workload& w) {
  const Operator* op = find_operator(w.op);
  return op && std::holds_alternative<ConvShape>(op->shape(w));
}

GemmShape gemm_shape(const Workload& w) { return std::get<GemmShape>(known(w).shape(w)); }
ConvShape conv_shape(const Workload& w) { return std::get<ConvShape>(known(w).shape(w)); }

std::vector<TensorArg> tensor_args(const Workload& w) { return known(w).args(w); }
std::vector<int64_t> output_shape(const Workload& w) { return tensor_args(w).back().shape; }
double flops(const Workload& w) { return known(w).flops(w); }

namespace {

// An Operator whose functions read the workload's typed shape with `read` and answer with the
// family's functions of that shape.
template <typename FamilyShape>
Operator family_operator(std::string name, std::vector<ParamSpec> params, std::function<FamilyShape(const Workload&)> read,
                         Status (*check)(const FamilyShape&), std::vector<TensorArg> (*args)(const FamilyShape&),
                         double (*flops)(const FamilyShape&), int64_t (*reduction_length)(const FamilyShape&)) {
  Operator op;
  op.name = std::move(name);
  op.params = std::move(params);
  op.dtypes = {DType::kFloat32};
  op.shape = [read](const Workload& w) -> Shape { return read(w); };
  op.check = [read, check](const Workload& w) { return check(read(w)); };
  op.args = [read, args](const Workload& w) { return args(read(w)); };
  op.flops = [read, flops](const Workload& w) { return flops(read(w)); };
  op.reduction_length = [read, reduction_length](const Workload& w) { return reduction_length(read(w)); };
  return op;
}

}  // namespace

Operator gemm_operator(std::string name, std::vector<ParamSpec> params, bool batched, bool transpose_b) {
  return family_operator<GemmShape>(
      std::move(name), std::move(params), [=](const Workload& w) { return read_gemm(w, batched, transpose_b); },
      check_gemm, gemm_args, gemm_flops, gemm_reduction_length);
}

Operator conv_operator(std::string name, std::vector<ParamSpec> params, ConvLayout layout, bool depthwise) {
  return family_operator<ConvShape>(
      std::move(name), std::move(params), [=](const Workload& w) { return read_conv(w, layout, depthwise); },
      check_conv, conv_args, conv_flops, conv_reduction_length);
}

}  // namespace tunefarm::operators
