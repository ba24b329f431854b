// Explicit vectorization: a loop marked vectorized whose body is stores (no inner loops) becomes
// vector statements. The loop variable turns into ramp(min, 1, n), scalar operands are
// broadcast, loads/stores at ramp indices with stride 1 become dense vector accesses (others
// gather/scatter); loops longer than the native width (16 floats) or of odd widths become
// several vector statements of power-of-two widths. A variable extent (a tile tail) runs at its
// constant bound with the lanes past the extent masked off. Loops that do not fit (a reduction
// into one element, a vector-valued let) stay scalar loops: correct, only slower.
#pragma once

#include "compiler/ir/ir.h"

namespace tunefarm::lower {

ir::Stmt vectorize_loops(const ir::Stmt& s);

}  // namespace tunefarm::lower
