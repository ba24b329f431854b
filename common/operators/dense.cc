// dense: C[M, N] = A[M, K] · W[N, K]ᵀ (a fully connected layer's weight as it is stored), with an
// optional epilogue applied in the kernel: bias[N], a residual[M, N] added, then ReLU, GELU (erf,
// or gelu_tanh=1: its tanh approximation) or SiLU (x sigmoid(x): LLaMA's gate projection) (a
// transformer's FFN: its activation and its residual add never make a pass over memory of their own). With w_block=b, W arrives already in the column
// panels the register tiles read, [ceil(N/b), K, b] ("NK{b}n", the last panel zero-padded): a
// model packs its constant weights so once when it is built, and tuning measures that kernel,
// which then packs nothing at run time.
#include "common/operators/operator.h"

namespace tunefarm::operators {

Operator dense() {
  // w_block: optional, 0 (W[N, K]) by default and then not printed; at most the widest tile.
  ParamSpec w_block = {"w_block", false, 0, 0, 64, false};
  return gemm_operator("dense", {dim("M"), dim("N"), dim("K"), flag("bias"), flag("residual"), flag("relu"), flag("gelu"),
                                        flag("gelu_tanh"), flag("silu"), w_block}, false, true);
}

}  // namespace tunefarm::operators
