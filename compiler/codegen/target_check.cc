// Checks a target against LLVM's own tables before anything builds for it. LLVM treats a bad CPU
// name or a subtarget without the features its backend assumes as a programming error and aborts
// the process (e.g. "64-bit code requested on a subtarget that doesn't support it"), so a target
// that a client sends must be proven good here, not discovered bad inside code generation.
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <fmt/format.h>
#include <llvm/ADT/Triple.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/TargetParser/Host.h>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/llvm_init.h"

namespace tunefarm::codegen {
namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

Status check_target_uncached(const Target& t) {
  // CUDA architectures are checked by the parser against the range the code generator supports;
  // the plain host target is what this process runs on.
  if (t.kind == Target::Kind::kCUDA) return Status();
  if (t.mtriple.empty() && t.mcpu.empty() && t.mattr.empty()) return Status();
  auto fail = [&](const std::string& why) { return invalid_argument(fmt::format("target '{}': {}", t.to_string(), why)); };

  std::string triple = t.mtriple.empty() ? llvm::sys::getProcessTriple() : llvm::Triple::normalize(t.mtriple);
  llvm::Triple parsed(triple);
  // Kernels follow a Linux ELF ABI and are linked by this host's linkers: x86_64 and aarch64 only.
  bool x86 = parsed.getArch() == llvm::Triple::x86_64;
  bool arm = parsed.getArch() == llvm::Triple::aarch64;
  if ((!x86 && !arm) || !parsed.isOSLinux())
    return fail(fmt::format("triple '{}' is not supported (kernels are built for x86_64 and aarch64 Linux, e.g. "
                            "-mtriple=aarch64-linux-gnu)",
                            t.mtriple));
  init_llvm();
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target) return fail(fmt::format("LLVM has no target for triple '{}': {}", triple, err));

  std::string cpu = !t.mcpu.empty() ? t.mcpu : t.mtriple.empty() ? llvm::sys::getHostCPUName().str() : "generic";
  std::unique_ptr<llvm::MCSubtargetInfo> plain(target->createMCSubtargetInfo(triple, "", ""));
  if (!plain) return fail(fmt::format("LLVM cannot describe subtargets of '{}'", triple));
  if (cpu != "generic" && !plain->isCPUStringValid(cpu))
    return fail(fmt::format("CPU '{}' is not known to LLVM for {} (e.g. {})", cpu, parsed.getArchName().str(),
                            x86 ? "x86-64-v3, skylake-avx512, znver4" : "cortex-a72, neoverse-n1"));

  if (!t.mattr.empty()) {
    for (const std::string& f : split_commas(t.mattr)) {
      if (f.size() < 2 || (f[0] != '+' && f[0] != '-'))
        return fail(fmt::format("feature '{}' must be +name or -name", f));
      // A feature LLVM does not know is ignored when switched off, so it still reads as on.
      std::string name = f.substr(1);
      std::unique_ptr<llvm::MCSubtargetInfo> off(target->createMCSubtargetInfo(triple, cpu, "-" + name));
      if (!off || off->checkFeatures("+" + name))
        return fail(fmt::format("feature '{}' is not known to LLVM for {}", name, parsed.getArchName().str()));
    }
  }
  // What the backends and our kernels assume of every subtarget of these architectures.
  std::string baseline = x86 ? "+64bit,+sse2" : "+neon,+fp-armv8";
  std::unique_ptr<llvm::MCSubtargetInfo> full(target->createMCSubtargetInfo(triple, cpu, t.mattr));
  if (!full || !full->checkFeatures(baseline))
    return fail(fmt::format("CPU '{}'{} lacks features the kernels need ({})", cpu,
                            t.mattr.empty() ? "" : " with -mattr=" + t.mattr, baseline));
  return Status();
}

}  // namespace

// Every build checks its target first, and a farm job's target names each feature its boards
// report (~100 on x86): checked one subtarget per feature, that was milliseconds a candidate.
// A target's answer never changes within a process; a few are in use at a time, and the cache
// starts again when clients have sent many.
Status check_target(const Target& t) {
  static std::mutex mu;
  static std::map<std::string, Status> checked;
  std::string key = t.to_string();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = checked.find(key); it != checked.end()) return it->second;
  }
  Status s = check_target_uncached(t);
  std::lock_guard<std::mutex> lock(mu);
  if (checked.size() >= 256) checked.clear();
  checked.emplace(key, s);
  return s;
}

}  // namespace tunefarm::codegen
