// Storage planning: where each intermediate tensor of a schedule lives and how it is laid out,
// before the loop nest is built. A stage computed at a consumer's loop gets a buffer of just the
// region that loop needs, in registers or shared memory (its scope), laid out in the order of its
// own loops so that its innermost (vectorized) axis is contiguous; a stage at the root gets the
// whole tensor, on the stack when small and in the runtime's workspace otherwise.
#pragma once

#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "compiler/ir/ir.h"
#include "compiler/lower/bound_inference.h"
#include "compiler/schedule/schedule.h"

namespace tunefarm::lower {

struct PlannedBuffer {
  ir::Buffer buffer;
  std::vector<ir::Expr> min;  // Region start per dimension, in the consumer's loop variables.
  // Buffer dimension i holds tensor dimension order[i].
  std::vector<size_t> order;

  std::vector<ir::Expr> permute(const std::vector<ir::Expr>& idx) const {
    std::vector<ir::Expr> out;
    for (size_t d : order) out.push_back(idx[d]);
    return out;
  }
};

struct StoragePlan {
  // Per intermediate tensor (by its te buffer): its buffer, region and layout.
  std::unordered_map<const ir::BufferNode*, PlannedBuffer> buffers;
  // Per loop variable: the stages computed at it, in schedule order.
  std::unordered_map<const te::IterVarNode*, std::vector<const schedule::Stage*>> attached;
};

// `args` are the kernel's tensor arguments; every placeholder and output must be among them.
StatusOr<StoragePlan> plan_storage(const schedule::Schedule& sched, const Bounds& bounds,
                                   const std::vector<te::Tensor>& args);

}  // namespace tunefarm::lower
