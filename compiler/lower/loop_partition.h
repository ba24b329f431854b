// Tail handling: a loop whose body holds min(a, b) with a - b linear in the loop variable is
// split where the min changes sides: the main part sees `a` only. The mins considered are the
// extents of unrolled and vectorized loops (a non-dividing split's inner extent min(f, E - o*f)
// becomes the constant f, so register tiles unroll and vectorize without guards) and mins in
// stored values and addresses (padding clamps). The split point may depend on outer loops: the
// tail is then one partial tile handled by variable-extent loops (masked vectors, scalar rows),
// so one copy of the full tile serves every block instead of one copy per block shape.
//
// A loop whose body guards reads by comparisons linear in its variable (a convolution's padding)
// is split into the interior, where every guard holds and goes, and its borders: peeled one
// iteration each where the guards then become constants (the padding's window positions drop
// out), else kept in one guarded copy the loop branches to.
#pragma once

#include "compiler/ir/ir.h"
#include "compiler/lower/simplify.h"

namespace tunefarm::lower {

ir::Stmt loop_partition(const ir::Stmt& s, const RangeMap& ranges = {});

}  // namespace tunefarm::lower
