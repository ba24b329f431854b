// What an operator is, once, without LLVM: its parameters, its typed shape, the checks a workload
// of it must pass, its tensor arguments (output shape included), FLOPs and reduction length. The
// workload parser (common/workload.cc), the compiler's templates (compiler/ops/), the model importer
// (model/) and the benchmarks (bench/) all read these descriptions, so that adding an operator
// touches its description (one file here and its line in registry.cc), its templates and its tests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/operators/conv.h"
#include "common/operators/gemm.h"
#include "common/operators/types.h"
#include "common/status.h"
#include "common/workload.h"

namespace tunefarm::operators {

// The typed shape of a workload: which alternative says which family the operator belongs to.
using Shape = std::variant<GemmShape, ConvShape>;

struct Operator {
  std::string name;
  // Every parameter in canonical order (the order the canonical string prints them in).
  std::vector<ParamSpec> params;
  std::vector<DType> dtypes;
  // The rest take a workload whose parameters the parser has checked against `params`.
  std::function<Shape(const Workload&)> shape;
  // Checks beyond each parameter's range (an empty output, blocks that do not divide the
  // channels); the parser then checks every tensor's size from `args`.
  std::function<Status(const Workload&)> check;
  std::function<std::vector<TensorArg>(const Workload&)> args;
  std::function<double(const Workload&)> flops;
  // How many products each output element sums at most (what the correctness check scales its
  // tolerance by).
  std::function<int64_t(const Workload&)> reduction_length;
};

// Every operator, in the order registry.cc lists them.
const std::vector<Operator>& all_operators();
// Null when no operator has that name.
const Operator* find_operator(std::string_view name);

// The typed shape of a parsed workload of that family (the workload's operator must be one).
bool is_gemm(const Workload& w);
bool is_conv(const Workload& w);
GemmShape gemm_shape(const Workload& w);
ConvShape conv_shape(const Workload& w);

// The description's answers for a parsed workload of a known operator.
std::vector<TensorArg> tensor_args(const Workload& w);
std::vector<int64_t> output_shape(const Workload& w);
double flops(const Workload& w);

// An operator of a family: its shape read by the family's reader, its checks, arguments, FLOPs and
// reduction length the family's.
Operator gemm_operator(std::string name, std::vector<ParamSpec> params, bool batched, bool transpose_b);
Operator conv_operator(std::string name, std::vector<ParamSpec> params, ConvLayout layout, bool depthwise);

// The descriptions, one function per operator file, collected by registry.cc.
Operator matmul();
Operator dense();
Operator batch_matmul();
Operator conv2d_nchw();
Operator conv2d_nhwc();
Operator depthwise_conv2d_nchw();
Operator conv2d_nchwc();
Operator depthwise_conv2d_nchwc();

}  // namespace tunefarm::operators
