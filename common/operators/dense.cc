// dense: C[M, N] = A[M, K] · W[N, K]ᵀ (a fully connected layer's weight as it is stored), with an
// optional bias[N] and ReLU applied in the kernel.
#include "common/operators/operator.h"

namespace tunefarm::operators {

Operator dense() {
  return gemm_operator("dense", {dim("M"), dim("N"), dim("K"), flag("bias"), flag("relu")}, false, true);
}

}  // namespace tunefarm::operators
