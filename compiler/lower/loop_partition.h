// Tail handling: a loop whose body contains min(a, b) with a - b linear in the loop variable is
// split at the iteration where the min changes sides, so that each part sees one side only. A
// non-dividing split's inner extent min(f, E - outer*f) thereby becomes the constant f in the main
// part and E mod f in the tail, and the inner loops of both parts can be unrolled and vectorized
// without guards.
#pragma once

#include "compiler/ir/ir.h"
#include "compiler/lower/simplify.h"

namespace tunefarm::lower {

ir::Stmt loop_partition(const ir::Stmt& s, const RangeMap& ranges = {});

}  // namespace tunefarm::lower
