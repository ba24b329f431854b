// What the templates' untuned defaults size their register tiles and cache blocks by: the target
// CPU's vectors and caches. The CPUs of one farm differ (AVX-512 and AVX2 x86 boards, ARM boards
// with NEON), so defaults read them from the target rather than assuming this machine's.
#pragma once

#include <cstdint>

namespace tunefarm::ops {

struct CpuModel {
  int64_t lanes = 16;             // float32 lanes of a vector register (AVX-512: 16, AVX2: 8, NEON: 4)
  int64_t vector_registers = 32;  // architectural vector registers (AVX-512 and NEON: 32, AVX2: 16)
  int64_t l1_bytes = 32 * 1024;   // level-1 data cache of one core
  int64_t l2_bytes = 1024 * 1024; // level-2 cache of one core
};

}  // namespace tunefarm::ops
