// Storage flattening: multi-dimensional tensor accesses become one flat, row-major element offset
// into their buffer, which is what the code generators address.
#pragma once

#include "compiler/ir/ir.h"

namespace tunefarm::lower {

ir::Stmt storage_flatten(const ir::Stmt& s);

}  // namespace tunefarm::lower
