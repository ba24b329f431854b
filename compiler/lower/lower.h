// Lowering: a schedule to a loop-IR function that the code generators take. lower.cc reads as
// the pipeline: bound inference, loop-nest construction, storage flattening, simplification,
// tail handling (loop partitioning), unrolling, vectorization, final simplification.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/ir/ir.h"
#include "compiler/schedule/schedule.h"

namespace tunefarm::lower {

StatusOr<ir::LoweredFunc> lower(const schedule::Schedule& sched, const std::vector<te::Tensor>& args,
                                const std::string& name);

}  // namespace tunefarm::lower
