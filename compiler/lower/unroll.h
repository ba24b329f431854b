// Unrolling: a loop marked unrolled with a constant extent becomes its body repeated with the
// loop variable replaced by each value, so that register tiles have constant indices (which is
// what lets LLVM keep a local accumulator tile in registers).
#pragma once

#include "compiler/ir/ir.h"

namespace tunefarm::lower {

// Loops longer than `max_extent` stay loops.
ir::Stmt unroll_loops(const ir::Stmt& s, int64_t max_extent = 64);

}  // namespace tunefarm::lower
