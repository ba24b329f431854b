// Targets: where code runs, spelled as in TVM ("llvm", "llvm -mtriple=aarch64-linux-gnu
// -mcpu=cortex-a72", "cuda -arch=sm_90"). One parser for every program.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace tunefarm {

struct Target {
  enum class Kind { kLLVM, kCUDA };
  Kind kind = Kind::kLLVM;
  std::string mtriple;  // Empty: the host's triple.
  std::string mcpu;     // Empty: the host's CPU (llvm) or generic.
  std::string mattr;    // Empty: the CPU's default features.
  std::string arch;     // CUDA only: sm_75 ... sm_90.

  bool is_host() const { return kind == Kind::kLLVM && mtriple.empty(); }

  // Canonical form: kind first, then options in a fixed order; empty options are left out.
  std::string to_string() const;

  bool operator==(const Target& other) const = default;
};

// Longer target strings are refused: every record of a job stores its target.
inline constexpr size_t kMaxTargetLength = 256;

// Parses a target string; unknown kinds, unknown options, repeated options, malformed values and
// CUDA architectures outside sm_75..sm_90 are errors that name the part at fault.
StatusOr<Target> parse_target(std::string_view text);

}  // namespace tunefarm
