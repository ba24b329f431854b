#include "compiler/codegen/llvm_init.h"

#include <mutex>

#include <llvm/Support/TargetSelect.h>

namespace tunefarm::codegen {

void init_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
  });
}

}  // namespace tunefarm::codegen
