// Symbolic interval arithmetic: the range [min, max] an integer expression takes when some of its
// variables range over intervals whose ends are themselves expressions. Bound inference uses it
// to find the region of a producer that one iteration of a consumer's outer loops touches.
#pragma once

#include <optional>
#include <unordered_map>

#include "compiler/ir/ir.h"

namespace tunefarm::lower {

struct Interval {
  ir::Expr min, max;  // Inclusive.
  static Interval point(const ir::Expr& e) { return {e, e}; }
};
using IntervalMap = std::unordered_map<const ir::VarNode*, Interval>;

// Variables absent from `vars` are fixed (a point). nullopt when the expression has a form whose
// range cannot be bounded this way (a load, a division by a variable).
std::optional<Interval> eval_interval(const ir::Expr& e, const IntervalMap& vars);

}  // namespace tunefarm::lower
