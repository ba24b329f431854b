// Bound inference: for every stage, the region of its tensor that must be computed (all of it
// for stages at the root; for a stage computed at a consumer's loop, the part that one iteration
// of the consumer's enclosing loops reads), and the extent of every axis the schedule derived by
// splitting and fusing. Extents may depend on outer loop variables (the tail of a non-dividing
// split); each also has a constant upper bound, used to size buffers.
#pragma once

#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "compiler/ir/ir.h"
#include "compiler/lower/simplify.h"
#include "compiler/schedule/schedule.h"

namespace tunefarm::lower {

struct StageBounds {
  // Per root axis (spatial, then reduction): the first index computed and how many.
  std::vector<ir::Expr> root_min, root_extent;
  std::unordered_map<const te::IterVarNode*, ir::Expr> extent;
  std::unordered_map<const te::IterVarNode*, int64_t> extent_bound;
  // Root and intermediate axes as expressions of the leaf variables, relative to root_min.
  std::unordered_map<const te::IterVarNode*, ir::Expr> value;
};

struct Bounds {
  std::unordered_map<const schedule::Stage*, StageBounds> stages;
  RangeMap ranges;  // Every leaf variable's constant range.
};

StatusOr<Bounds> infer_bounds(const schedule::Schedule& sched);

}  // namespace tunefarm::lower
