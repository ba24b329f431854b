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
  // dense: W arrives packed in column panels, [ceil(N / w_block), K, w_block] with the last panel
  // zero-padded (a model packs its constant weights so once when it is built); 0: W[N, K].
  int64_t w_block = 0;
};

// Reads M, N, K and, where the operator has them, B (the batch), bias and relu.
GemmShape read_gemm(const Workload& w, bool batched, bool transpose_b);

// A, then B [K, N] or W [N, K] (or its panels), then bias [N] when there is one, then C [M, N];
// batched ones with the batch in front.
std::vector<TensorArg> gemm_args(const GemmShape& g);
double gemm_flops(const GemmShape& g);
// K.
int64_t gemm_reduction_length(const GemmShape& g);
// A GEMM's parameters' ranges are all its checks: every shape makes sense.
Status check_gemm(const GemmShape& g);

// The same dense workload taking W[N, K] (w_block dropped); any other workload as it is.
Workload without_weight_panels(Workload w);

}  // namespace tunefarm::operators
