// LLVM's target registry, filled once per process, and what LLVM is told for a target.
#pragma once

#include <string>

#include "common/target.h"

namespace tunefarm::codegen {

// Registers every target LLVM was built with (infos, targets, MC layers, assembly printers).
// LLVM's registration functions prepend to unsynchronized lists: two threads registering at once
// can link a list into a cycle that lookupTarget then walks forever, so every use of the registry
// calls this first and the registration itself runs exactly once.
void init_llvm();

// The triple, CPU and features LLVM compiles a target for: the host's own CPU and features where
// the target names none (features as the host reports them, so a VM that hides AVX-512 gets none).
struct TargetInfo {
  std::string triple, cpu, features;
  bool gpu = false;
  bool x86 = false;
};
TargetInfo target_info(const Target& t);

}  // namespace tunefarm::codegen
