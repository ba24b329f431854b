// The vectors of a target's CPU come from LLVM's subtarget tables (what the code generator will
// use); cache sizes from this machine when the target is its own CPU, else typical sizes, since a
// board's caches are not in the target string.
#include <unistd.h>

#include <memory>

#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/ADT/Triple.h>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/llvm_init.h"

namespace tunefarm::codegen {
namespace {

int64_t host_cache(int name, int64_t fallback) {
  long bytes = sysconf(name);
  return bytes > 0 ? bytes : fallback;
}

}  // namespace

ops::CpuModel cpu_model(const Target& t) {
  ops::CpuModel m;
  if (t.kind != Target::Kind::kLLVM || !check_target(t).ok()) return m;
  // The CPU and features the code generator will compile for.
  TargetInfo info = target_info(t);
  init_llvm();
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(info.triple, err);
  if (!target) return m;
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(info.triple, info.cpu, info.features));
  if (!sti) return m;
  if (llvm::Triple(info.triple).getArch() == llvm::Triple::aarch64) {
    m.lanes = 4;
    m.vector_registers = 32;
  } else if (sti->checkFeatures("+avx512f")) {
    m.lanes = 16;
    m.vector_registers = 32;
  } else if (sti->checkFeatures("+avx")) {
    m.lanes = 8;
    m.vector_registers = 16;
  } else {
    m.lanes = 4;
    m.vector_registers = 16;
  }
  bool this_cpu = t.mtriple.empty() && (t.mcpu.empty() || t.mcpu == target_info(Target{}).cpu);
  if (this_cpu) {
    m.l1_bytes = host_cache(_SC_LEVEL1_DCACHE_SIZE, m.l1_bytes);
    m.l2_bytes = host_cache(_SC_LEVEL2_CACHE_SIZE, m.l2_bytes);
  } else {
    m.l2_bytes = 512 * 1024;
  }
  return m;
}

}  // namespace tunefarm::codegen
