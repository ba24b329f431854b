// Lowering: a schedule to a loop-IR function that the code generators take. lower.cc reads as
// the pipeline: bound inference, storage planning, loop-nest construction, storage flattening,
// GPU barriers, simplification; then tail handling (loop partitioning), unrolling,
// vectorization, final simplification.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/ir/ir.h"
#include "compiler/schedule/schedule.h"

namespace tunefarm::lower {

StatusOr<ir::LoweredFunc> lower(const schedule::Schedule& sched, const std::vector<te::Tensor>& args,
                                const std::string& name);

// The first half of the pipeline: the flattened, simplified loop nest with every loop still
// carrying its annotation (parallel, vectorized, unrolled, bound) and its full extent. Features
// are read from this form; lower() continues from it.
StatusOr<ir::LoopNest> lower_loops(const schedule::Schedule& sched, const std::vector<te::Tensor>& args,
                                   const std::string& name);
// The second half: tail handling, unrolling, vectorization, final simplification.
ir::LoweredFunc finish_lowering(ir::LoopNest loops);

}  // namespace tunefarm::lower
