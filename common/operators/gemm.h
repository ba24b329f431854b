// The GEMM family's shape (matmul, dense, batch_matmul) and what its descriptions share.
#pragma once

#include <cstdint>
#include <vector>

#include "common/operators/types.h"
#include "common/status.h"
#include "common/workload.h"

namespace tunefarm::operators {

struct GemmShape {
  bool batched = false;      // batch_matmul: a leading batch axis on A, B and C.
  bool transpose_b = false;  // dense: the second operand is W[N, K].
  bool bias = false, relu = false;
  int64_t batch = 1, M = 0, N = 0, K = 0;
};

// Reads M, N, K and, where the operator has them, B (the batch), bias and relu.
GemmShape read_gemm(const Workload& w, bool batched, bool transpose_b);

// A, then B [K, N] or W [N, K], then bias [N] when there is one, then C [M, N]; batched ones
// with the batch in front.
std::vector<TensorArg> gemm_args(const GemmShape& g);
double gemm_flops(const GemmShape& g);
// K.
int64_t gemm_reduction_length(const GemmShape& g);
// A GEMM's parameters' ranges are all its checks: every shape makes sense.
Status check_gemm(const GemmShape& g);

}  // namespace tunefarm::operators
