// GPU barrier insertion. A shared-memory tile is filled by the whole thread block: every thread
// must wait until the fill is complete before reading it, and until everyone has read it before
// it is filled again. The loop nest puts the fills of a compute_at position first, then the code
// that reads them, inside the tiles' allocations; this pass puts a barrier after the last fill
// and one after the reads.
#pragma once

#include "compiler/ir/ir.h"

namespace tunefarm::lower {

ir::Stmt insert_gpu_barriers(const ir::Stmt& s);

}  // namespace tunefarm::lower
