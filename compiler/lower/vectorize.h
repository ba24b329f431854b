// Explicit vectorization: a loop marked vectorized, with a constant extent and a body of stores
// (no inner loops), becomes one vector statement. The loop variable turns into ramp(min, 1, n),
// scalar operands are broadcast, and loads/stores at ramp indices with stride 1 become dense
// vector accesses; loops longer than the native width (16 floats) or of odd widths become
// several vector statements of power-of-two widths. Loops that do not fit stay scalar loops, which is correct, only slower.
#pragma once

#include "compiler/ir/ir.h"

namespace tunefarm::lower {

ir::Stmt vectorize_loops(const ir::Stmt& s);

}  // namespace tunefarm::lower
