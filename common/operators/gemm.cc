#include "common/operators/gemm.h"

#include <fmt/format.h>

namespace tunefarm::operators {

GemmShape read_gemm(const Workload& w, bool batched, bool transpose_b) {
  GemmShape g;
  g.batched = batched;
  g.transpose_b = transpose_b;
  g.M = w.param("M");
  g.N = w.param("N");
  g.K = w.param("K");
  if (batched) g.batch = w.param("B");
  g.bias = w.param("bias") != 0;
  g.residual = w.param("residual") != 0;
  g.relu = w.param("relu") != 0;
  g.gelu = w.param("gelu") != 0;
  g.gelu_tanh = w.param("gelu_tanh") != 0;
  g.silu = w.param("silu") != 0;
  if (transpose_b) g.w_block = w.param("w_block");
  return g;
}

std::vector<TensorArg> gemm_args(const GemmShape& g) {
  auto with_batch = [&](std::vector<int64_t> shape) {
    if (g.batched) shape.insert(shape.begin(), g.batch);
    return shape;
  };
  std::vector<TensorArg> args = {TensorArg::input("A", with_batch({g.M, g.K}))};
  if (g.w_block > 0)
    args.push_back(TensorArg::weight("W", {(g.N + g.w_block - 1) / g.w_block, g.K, g.w_block}, fmt::format("NK{}n", g.w_block)));
  else
    args.push_back(g.transpose_b ? TensorArg::weight("W", {g.N, g.K}) : TensorArg::input("B", with_batch({g.K, g.N})));
  if (g.bias) args.push_back(TensorArg::weight("bias", {g.N}));
  if (g.residual) args.push_back(TensorArg::input("residual", with_batch({g.M, g.N})));
  args.push_back({"C", with_batch({g.M, g.N}), DType::kFloat32, true, ""});
  return args;
}

double gemm_flops(const GemmShape& g) { return 2.0 * g.batch * g.M * g.N * g.K; }

int64_t gemm_reduction_length(const GemmShape& g) { return g.K; }

Status check_gemm(const GemmShape& g) {
  if (int(g.relu) + int(g.gelu) + int(g.gelu_tanh) + int(g.silu) > 1)
    return invalid_argument("relu=1, gelu=1, gelu_tanh=1 and silu=1 exclude each other (one activation)");
  return Status();
}

Workload without_weight_panels(Workload w) {
  for (auto& [name, value] : w.params)
    if (name == "w_block") value = 0;
  return w;
}

}  // namespace tunefarm::operators
