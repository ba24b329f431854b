// matmul: C[M, N] = A[M, K] · B[K, N].
#include "common/operators/operator.h"

namespace tunefarm::operators {

Operator matmul() { return gemm_operator("matmul", {dim("M"), dim("N"), dim("K")}, false, false); }

}  // namespace tunefarm::operators
