// Loop-nest construction: turns a scheduled set of stages and their inferred bounds into one
// statement. Each stage becomes loops over its leaf axes (in the schedule's order, with their
// annotations) around a store of its compute body; a reduction gets its initialisation nest right
// before its outermost reduction loop; a stage computed at a consumer's loop is emitted at the
// top of that loop's body, inside an allocation of just the region it produces. Accesses to a
// realized region are rebased to the region's first element.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/ir/ir.h"
#include "compiler/lower/bound_inference.h"
#include "compiler/lower/storage_plan.h"
#include "compiler/schedule/schedule.h"

namespace tunefarm::lower {

// `args` are the kernel's tensor arguments in order (inputs, then outputs); `plan` says where the
// intermediate tensors live (storage_plan.h).
StatusOr<ir::LoweredFunc> build_loop_nest(const schedule::Schedule& sched, const Bounds& bounds, const StoragePlan& plan,
                                          const std::vector<te::Tensor>& args, const std::string& name);

}  // namespace tunefarm::lower
