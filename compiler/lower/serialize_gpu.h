// Runs a GPU schedule's loop nest on the CPU, for testing without a GPU: loops bound to
// blockIdx/threadIdx become serial loops, in nesting order. Exact for kernels whose threads do
// not communicate; a nest with shared memory (threads cooperate between barriers) is refused.
#pragma once

#include "common/status.h"
#include "compiler/ir/ir.h"

namespace tunefarm::lower {

StatusOr<ir::Stmt> serialize_gpu_loops(const ir::Stmt& s);

}  // namespace tunefarm::lower
