// This machine's CPU as LLVM names it: a CPU name ("znver4", "haswell", "cortex-a72") and a feature
// list ("+avx2,+fma,-avx512f"), found without LLVM (the agent does not link it) from /proc/cpuinfo
// on x86-64 and from the MIDR register and the kernel's hardware capabilities on aarch64. Agents
// say it in their hello; tunerd compiles a job for the CPU of its key's agents (common/platform.h).
//
// The feature list covers the features that change the code the kernels get (vector extensions),
// each with + or -, so that a CPU name that implies more than the machine has (a VM that hides
// AVX-512, say) is corrected. Unknown models fall back to the x86-64 levels (x86-64-v3 ...) or to
// "generic" on aarch64.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tunefarm {

struct CpuDescription {
  std::string name;      // LLVM's CPU name; "generic" when nothing better is known.
  std::string features;  // Comma-separated "+name"/"-name" in LLVM's spelling; may be empty.
};

// From the text of /proc/cpuinfo of an x86-64 machine (its first processor's vendor, family, model
// and flags).
CpuDescription x86_cpu_from_cpuinfo(std::string_view cpuinfo);

// An aarch64 CPU from its MIDR_EL1 value (implementer and part number; 0 when unknown) and the
// kernel's AT_HWCAP and AT_HWCAP2 bits.
CpuDescription aarch64_cpu(uint64_t midr, uint64_t hwcap, uint64_t hwcap2);

// The MIDR of the last processor /proc/cpuinfo lists ("CPU implementer", "CPU part"), 0 when it
// lists none (user-mode emulators show the host's file). On big.LITTLE boards Linux numbers the
// big cores last, and code tuned for them runs on the little ones of the same generation.
uint64_t aarch64_midr_from_cpuinfo(std::string_view cpuinfo);

// This machine's CPU.
CpuDescription host_cpu();

inline constexpr size_t kMaxCpuFeaturesLength = 200;

// Checks a CPU name and feature list given by hand (device-agent --cpu, --cpu-features) or in a
// hello: the characters of a name, "+name"/"-name" items, and a list short enough for a target
// string. Whether LLVM knows them is tunerd's check.
Status check_cpu_description(const CpuDescription& cpu);

}  // namespace tunefarm
