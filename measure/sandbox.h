// The measurement worker's sandbox: what the process that runs foreign kernels may not do. It
// runs in its own process group under resource limits (address space, file size, no core files, CPU
// time per candidate), without a network (its own network namespace where the kernel allows one,
// and a seccomp filter that denies creating sockets, executing programs, starting processes
// other than threads and signalling other processes), and may write only inside its scratch
// directory (which holds the current candidate's directory and nothing else) and read only that, the system's libraries and its own /proc entry (Landlock, where
// the kernel has it; the agent reports at start when it does not).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace tunefarm {

struct SandboxLimits {
  // Address-space cap in bytes; 0 sets none (CUDA drivers reserve more address space than any
  // useful cap, so GPU boards run without one).
  uint64_t memory_bytes = 0;
  // Largest file the worker may write, in bytes; 0 sets none.
  uint64_t file_bytes = 0;
  // CPU seconds one request may use, all threads together; 0 derives it from the request's
  // timeout (the wall-clock timeout times the cores), which makes it a backstop for that timeout.
  uint64_t cpu_seconds = 0;
};

// What enter_sandbox managed to set up. The limits are not optional; layers that the kernel (or a
// user-mode emulator such as qemu-user, for an agent of another architecture) does not offer are
// left out with a warning: the network namespace, Landlock, the seccomp filter, and an
// address-space cap that is accepted but not applied.
struct SandboxReport {
  bool network_namespace = false;
  bool seccomp = false;
  // Landlock ABI version in use; 0 when the kernel has no Landlock and files are not confined.
  int landlock_abi = 0;
  // Lines that say which layer is missing and why, for the worker to print once.
  std::string warnings;
};

// Confines this process. Must run while the process has a single thread: the filter and the
// Landlock domain are inherited only by threads started afterwards.
StatusOr<SandboxReport> enter_sandbox(const std::string& scratch_dir, const SandboxLimits& limits);

// Lets the current candidate use at most `seconds` more CPU time (all threads together); past it
// the process gets SIGXCPU. The worker is long-lived, so this moves the cumulative limit forward
// before every request.
Status limit_cpu_time(double seconds);

// The highest Landlock ABI this kernel offers, 0 when it has none.
int landlock_abi_version();

// The worker's command-line form of the limits, and back.
std::string format_limit_flag(const char* name, uint64_t value);
bool parse_limit_flag(const std::string& arg, SandboxLimits& limits);

}  // namespace tunefarm
