// LLVM's target registry, filled once per process.
#pragma once

namespace tunefarm::codegen {

// Registers every target LLVM was built with (infos, targets, MC layers, assembly printers).
// LLVM's registration functions prepend to unsynchronized lists: two threads registering at once
// can link a list into a cycle that lookupTarget then walks forever, so every use of the registry
// calls this first and the registration itself runs exactly once.
void init_llvm();

}  // namespace tunefarm::codegen
