// batch_matmul: C[b] = A[b] · B[b] for each of B batches (A [B, M, K], B [B, K, N]).
#include "common/operators/operator.h"

namespace tunefarm::operators {

Operator batch_matmul() {
  return gemm_operator("batch_matmul", {dim("B"), dim("M"), dim("N"), dim("K")}, true, false);
}

}  // namespace tunefarm::operators
