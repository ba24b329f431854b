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
  // dense's epilogue, in this order: a bias per column, a residual tensor like C added, then one
  // activation (ReLU, GELU with erf as ONNX's Gelu computes it, or GELU's tanh approximation).
  bool bias = false, residual = false, relu = false, gelu = false, gelu_tanh = false, silu = false;
  int64_t batch = 1, M = 0, N = 0, K = 0;
  // dense: W arrives packed in column panels, [ceil(N / w_block), K, w_block] with the last panel
  // zero-padded (a model packs its constant weights so once when it is built); 0: W[N, K].
  int64_t w_block = 0;
};

// Reads M, N, K and, where the operator has them, B (the batch) and the epilogue's flags.
GemmShape read_gemm(const Workload& w, bool batched, bool transpose_b);

// A, then B [K, N] or W [N, K] (or its panels), then bias [N] and residual [M, N] where there are
// those, then C [M, N]; batched ones with the batch in front.
std::vector<TensorArg> gemm_args(const GemmShape& g);
double gemm_flops(const GemmShape& g);
// K.
int64_t gemm_reduction_length(const GemmShape& g);
// Every shape makes sense; the epilogue has one activation at most.
Status check_gemm(const GemmShape& g);

// The same dense workload taking W[N, K] (w_block dropped); any other workload as it is.
Workload without_weight_panels(Workload w);

}  // namespace tunefarm::operators
