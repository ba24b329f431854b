// The measurement worker's sandbox: what the process that runs one foreign kernel may not do. It
// runs in a session of its own without a terminal, in its own user, PID, mount, network and IPC
// namespaces where the system allows them, as an unprivileged user without capabilities (nobody
// when the agent is root), under resource limits (address space, file size, threads, no core
// files, CPU time), with a seccomp filter that denies sockets, programs, processes other than
// threads, signals and signal-driven I/O aimed outside it, terminal input injection, process-group
// and session changes, memfd and new namespaces, and may write only inside its scratch directory
// and read only that, the system's libraries and its own /proc entry (Landlock, where the kernel
// has it). The agent logs at start which layers it has and which are missing.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace tunefarm {

inline constexpr uint64_t kWithoutLandlock = 1;  // files outside the scratch directory reachable
inline constexpr uint64_t kWithoutSeccomp = 2;   // every system call allowed
inline constexpr uint64_t kWithoutNobody = 4;    // a root agent's kernels keep its uid (capabilities still dropped)
inline constexpr uint64_t kWithoutPrivateDev = 8;  // the machine's /dev inside the namespaces

// The names of those bits, as the agent's --sandbox-without takes them; INVALID_ARGUMENT names the
// known ones for any other.
StatusOr<uint64_t> sandbox_layer_bit(const std::string& name);

struct SandboxLimits {
  // Address-space cap in bytes; 0 sets none (CUDA drivers reserve more address space than any
  // useful cap, so GPU boards run without one).
  uint64_t memory_bytes = 0;
  // Largest file the worker may write, in bytes; 0 sets none.
  uint64_t file_bytes = 0;
  // CPU seconds one request may use, all threads together; 0 derives it from the request's
  // timeout (the wall-clock timeout times the cores), which makes it a backstop for that timeout.
  uint64_t cpu_seconds = 0;
  // 0: no namespaces even where the system offers them, as in a container without them, so that
  // what an agent has there can be seen (and tested) anywhere.
  uint64_t namespaces = 1;
  // Layers turned off by the agent's operator (kWithout* bits), for a board whose driver one of them
  // breaks: the agent warns of each at start, as of any missing layer.
  uint64_t without = 0;
  // 1: the board has a GPU, whose driver needs what a CPU kernel does not: Unix sockets, /sys, and
  // (with no address-space cap) memfd.
  uint64_t gpu = 0;
  // The cgroup directories (one per hierarchy) the worker joins first, so that every process it
  // starts is inside them (measure/cgroup.h); empty where the measurer makes none.
  std::vector<std::string> cgroups;
};

// What enter_sandbox managed to set up. The limits are not optional; layers that the kernel (or a
// user-mode emulator such as qemu-user, for an agent of another architecture) does not offer are
// left out with a warning: the namespaces, Landlock, the seccomp filter, and an address-space cap
// that is accepted but not applied.
struct SandboxReport {
  // Its own user (unprivileged only), PID, mount, network and IPC namespaces: the kernel sees no
  // process outside it, a /dev of null, zero, full, random and urandom, and a private tmpfs as its
  // scratch directory and /tmp, which vanishes with it.
  bool namespaces = false;
  // The private /dev and tmpfs /tmp of those namespaces (false where the mounts failed, e.g. in a
  // container that refuses them: then the kernel's files go to the scratch directory it was given).
  bool private_tmp = false;
  // A /proc of the PID namespace's own (its processes only; pids as the kernel's getpid() says).
  bool private_proc = false;
  bool network_namespace = false;
  // The uid the kernel runs as (nobody when the agent is root), without capabilities.
  uid_t uid = 0;
  bool seccomp = false;
  // Landlock ABI version in use; 0 when the kernel has no Landlock and files are not confined.
  int landlock_abi = 0;
  // Where the kernel's files go: the private tmpfs, or the scratch directory it was given.
  std::string scratch_dir;
  // One line that names the layers in place, for the agent to log at start.
  std::string layers;
  // Lines that say which layer is missing and why.
  std::string warnings;
};

// Confines this process. Must run while the process has a single thread: the filter and the
// Landlock domain are inherited only by threads started afterwards. With a PID namespace the
// kernel runs in a grandchild (the namespace's init sits between, in a session of its own): the
// processes above it only wait, never return from here, and end as it ended, so that the
// measurer's SIGKILL of the process it started ends the whole namespace. Every descriptor above
// the worker channel is closed first.
StatusOr<SandboxReport> enter_sandbox(const std::string& scratch_dir, const SandboxLimits& limits);

// Lets the candidate use at most `seconds` more CPU time (all threads together); past it the
// process gets SIGXCPU.
Status limit_cpu_time(double seconds);

// The highest Landlock ABI this kernel offers, 0 when it has none.
int landlock_abi_version();

// The worker's command-line form of the limits, and back.
std::string format_limit_flag(const char* name, uint64_t value);
bool parse_limit_flag(const std::string& arg, SandboxLimits& limits);

}  // namespace tunefarm
