#include "compiler/codegen/llvm_init.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include <llvm/ADT/StringMap.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/TargetParser/Host.h>

namespace tunefarm::codegen {

void init_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    // Loop strength reduction rates each candidate formula by the cost of setting up its
    // registers, recursing through the operands of their expressions without memoizing, which
    // the deep index expressions of tiled, unrolled kernels make costly (~1 ms of a 3x3
    // convolution candidate at the default depth of 7). At depth 2 the generated code of every
    // tuned ResNet-50 and MobileNetV2 layer is the same but for register names and one hoisted
    // add outside the loops.
    auto& options = llvm::cl::getRegisteredOptions();
    if (auto it = options.find("lsr-setupcost-depth-limit"); it != options.end())
      static_cast<llvm::cl::opt<unsigned>*>(it->second)->setValue(2);
  });
}

TargetInfo target_info(const Target& t) {
  TargetInfo info;
  if (t.kind == Target::Kind::kCUDA) {
    info.triple = "nvptx64-nvidia-cuda";
    info.cpu = t.arch.empty() ? "sm_75" : t.arch;
    info.features = "+ptx78";
    info.gpu = true;
    return info;
  }
  if (t.mtriple.empty()) {
    // The host's CPU and features, asked of the CPU once: each query executes cpuid, which a
    // virtual machine traps.
    static const TargetInfo host = [] {
      TargetInfo h;
      h.triple = llvm::sys::getProcessTriple();
      h.cpu = llvm::sys::getHostCPUName().str();
      llvm::StringMap<bool> reported;
      std::vector<std::string> feats;
      if (llvm::sys::getHostCPUFeatures(reported))
        for (const auto& f : reported) feats.push_back(std::string(f.second ? "+" : "-").append(f.first()));
      std::sort(feats.begin(), feats.end());
      for (const auto& f : feats) h.features += (h.features.empty() ? "" : ",") + f;
      return h;
    }();
    info.triple = host.triple;
    info.cpu = t.mcpu.empty() ? host.cpu : t.mcpu;
    info.features = t.mattr.empty() && t.mcpu.empty() ? host.features : t.mattr;
  } else {
    info.triple = t.mtriple;
    info.cpu = t.mcpu.empty() ? "generic" : t.mcpu;
    info.features = t.mattr;
  }
  info.x86 = info.triple.rfind("x86_64", 0) == 0;
  return info;
}


}  // namespace tunefarm::codegen
