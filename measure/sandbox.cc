#include "measure/sandbox.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

namespace tunefarm {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "the measurement sandbox knows the system calls of x86-64 and aarch64 only"
#endif

Status set_limit(int resource, uint64_t value, const char* what) {
  rlimit limit{value, value};
  if (setrlimit(resource, &limit) != 0)
    return internal_error(fmt::format("cannot limit the worker's {}: {}", what, std::strerror(errno)));
  return Status();
}

// A seccomp program: system calls a kernel has no business making are refused with an errno (not
// killed, so that the kernel's own error path runs and the result names the failure).
class FilterBuilder {
 public:
  FilterBuilder() {
    add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0));
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
#if defined(__x86_64__)
    // x32 system calls carry the same architecture with bit 30 set in the number: refuse them all.
    load_nr();
    add(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
#endif
  }

  void deny(long nr, int error) {
    load_nr();
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1));
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<uint32_t>(error) & SECCOMP_RET_DATA)));
  }

  // Allows `nr` only when its first argument (a pid, compared as 32 bits) is one of `allowed`.
  void allow_only_first_arg(long nr, const std::vector<uint32_t>& allowed, int error) {
    load_nr();
    auto skip = static_cast<uint8_t>(allowed.size() + 3);
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, skip));
    add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
    for (size_t i = 0; i < allowed.size(); ++i) {
      auto to_allow = static_cast<uint8_t>(allowed.size() - i);
      add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, allowed[i], to_allow, 0));
    }
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<uint32_t>(error) & SECCOMP_RET_DATA)));
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  }

  // Allows `nr` only when its first argument has the bit `flag` set (low 32 bits).
  void allow_only_with_flag(long nr, uint32_t flag, int error) {
    load_nr();
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 4));
    add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
    add(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, flag, 1, 0));
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<uint32_t>(error) & SECCOMP_RET_DATA)));
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  }

  // 0, or the errno of the refusal.
  int install() {
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    sock_fprog program{static_cast<unsigned short>(code_.size()), code_.data()};
    return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) == 0 ? 0 : errno;
  }

 private:
  void load_nr() { add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr))); }
  void add(sock_filter instruction) { code_.push_back(instruction); }
  std::vector<sock_filter> code_;
};

int install_seccomp_filter() {
  FilterBuilder filter;
  // No network: no new sockets of any family (the channel to the agent was opened before exec),
  // and no io_uring, whose requests would bypass this filter.
  filter.deny(SYS_socket, EACCES);
  filter.deny(SYS_io_uring_setup, ENOSYS);
  // No other programs: a kernel must not turn into a shell.
  filter.deny(SYS_execve, EACCES);
  filter.deny(SYS_execveat, EACCES);
  // No new processes: threads only (clone with CLONE_THREAD stays in this process and dies with
  // it), so nothing a kernel starts can outlive the worker, change its session or fork-bomb the
  // board. clone3 cannot be inspected (its flags are behind a pointer): ENOSYS makes the C library
  // fall back to clone for threads.
#if defined(SYS_fork)
  filter.deny(SYS_fork, EPERM);
#endif
#if defined(SYS_vfork)
  filter.deny(SYS_vfork, EPERM);
#endif
  filter.deny(SYS_clone3, ENOSYS);
  filter.allow_only_with_flag(SYS_clone, CLONE_THREAD, EPERM);
  // No reaching into other processes of the same user, the agent among them.
  filter.deny(SYS_ptrace, EPERM);
  filter.deny(SYS_process_vm_writev, EPERM);
  filter.deny(SYS_process_vm_readv, EPERM);
  filter.deny(SYS_pidfd_open, EPERM);
  filter.deny(SYS_tkill, EPERM);
  // Signals only to itself and its own process group (the C library's abort and raise use these).
  auto self = static_cast<uint32_t>(getpid());
  filter.allow_only_first_arg(SYS_kill, {self, 0, static_cast<uint32_t>(-static_cast<int32_t>(self))}, EPERM);
  filter.allow_only_first_arg(SYS_tgkill, {self}, EPERM);
  filter.allow_only_first_arg(SYS_rt_sigqueueinfo, {self}, EPERM);
  filter.allow_only_first_arg(SYS_rt_tgsigqueueinfo, {self}, EPERM);
  return filter.install();
}

// Landlock's write-like rights by ABI version: 1 has the first thirteen, 2 adds REFER (moving
// files between directories), 3 adds TRUNCATE.
uint64_t landlock_write_rights(int abi) {
  uint64_t rights = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                    LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                    LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                    LANDLOCK_ACCESS_FS_MAKE_SYM;
  if (abi >= 2) rights |= 1ULL << 13;
  if (abi >= 3) rights |= 1ULL << 14;
  return rights;
}

constexpr uint64_t kReadRights = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
// Rights Landlock accepts on a rule for a file (not a directory).
constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_EXECUTE | (1ULL << 14) /* TRUNCATE */;

Status allow_beneath(int ruleset, const std::string& path, uint64_t rights) {
  int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return internal_error(fmt::format("cannot open '{}' for the sandbox: {}", path, std::strerror(errno)));
  if (!std::filesystem::is_directory(path)) rights &= kFileRights;
  landlock_path_beneath_attr rule{};
  rule.allowed_access = rights;
  rule.parent_fd = fd;
  long rc = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
  int err = errno;
  close(fd);
  if (rc != 0) return internal_error(fmt::format("cannot allow access to '{}': {}", path, std::strerror(err)));
  return Status();
}

// What a kernel may read besides its scratch directory: the system's libraries and the loader's
// cache (kernels and GPU drivers load them), CPU topology, devices, and this process's own /proc
// entry. Not the rest of the file system: the agent's token file, TLS key and other processes'
// /proc entries (the agent's command line and environment) stay out of reach.
std::vector<std::string> readable_paths() {
  std::vector<std::string> paths = {"/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/etc/ld.so.conf",
                                    "/etc/ld.so.conf.d", "/sys/devices/system/cpu", "/proc/driver",
                                    "/proc/self"};
  std::vector<std::string> present;
  for (auto& p : paths) {
    std::error_code ec;
    // /proc/self must become this process's own directory: a rule follows the path it is given.
    auto resolved = std::filesystem::canonical(p, ec);
    if (!ec) present.push_back(resolved.string());
  }
  return present;
}

Status confine_files(const std::string& scratch_dir, int abi) {
  uint64_t handled = landlock_write_rights(abi) | kReadRights;
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = handled;
  int ruleset = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
  if (ruleset < 0) return internal_error(fmt::format("cannot create a Landlock ruleset: {}", std::strerror(errno)));
  Status s = allow_beneath(ruleset, scratch_dir, handled);
  // The worker removes its scratch directory when the agent is killed outright; that takes the
  // right to remove an (empty) directory from its parent.
  std::filesystem::path parent = std::filesystem::path(scratch_dir).parent_path();
  if (s.ok() && !parent.empty()) s = allow_beneath(ruleset, parent.string(), LANDLOCK_ACCESS_FS_REMOVE_DIR);
  // Devices are opened for writing by the C library and by GPU drivers; files there are not storage.
  if (s.ok()) s = allow_beneath(ruleset, "/dev", handled & (LANDLOCK_ACCESS_FS_WRITE_FILE | kReadRights));
  for (const std::string& path : readable_paths())
    if (s.ok()) s = allow_beneath(ruleset, path, kReadRights);
  if (s.ok() && syscall(SYS_landlock_restrict_self, ruleset, 0) != 0)
    s = internal_error(fmt::format("cannot enter the Landlock domain: {}", std::strerror(errno)));
  close(ruleset);
  return s;
}

}  // namespace

int landlock_abi_version() {
  long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

StatusOr<SandboxReport> enter_sandbox(const std::string& scratch_dir, const SandboxLimits& limits) {
  SandboxReport report;
  if (chdir(scratch_dir.c_str()) != 0)
    return internal_error(fmt::format("cannot enter the scratch directory '{}': {}", scratch_dir, std::strerror(errno)));
  // Temporary files a kernel (or a GPU driver's cache) makes belong in the scratch directory.
  setenv("TMPDIR", scratch_dir.c_str(), 1);
  setenv("CUDA_CACHE_PATH", (scratch_dir + "/cuda-cache").c_str(), 1);

  TF_RETURN_IF_ERROR(set_limit(RLIMIT_CORE, 0, "core files"));
  if (limits.file_bytes > 0) {
    TF_RETURN_IF_ERROR(set_limit(RLIMIT_FSIZE, limits.file_bytes, "file size"));
    // A write past the limit should fail with EFBIG, not kill the worker mid-reply.
    signal(SIGXFSZ, SIG_IGN);
  }
  if (limits.memory_bytes > 0) {
    TF_RETURN_IF_ERROR(set_limit(RLIMIT_AS, limits.memory_bytes, "address space"));
    // User-mode emulators (qemu-user) accept the cap and do not apply it, since it would bind the
    // emulator itself: reading it back tells.
    rlimit applied{};
    if (getrlimit(RLIMIT_AS, &applied) != 0 || applied.rlim_cur != limits.memory_bytes)
      report.warnings += fmt::format(
          "the address-space cap of {} MiB did not take (this kernel or emulator ignores it): a kernel that "
          "allocates without bound can use all of this board's memory\n",
          limits.memory_bytes >> 20);
  }

  // A new network namespace has no interfaces but a loopback that is down. Without privileges it
  // takes a user namespace too; some kernels or containers allow neither.
  if (unshare(CLONE_NEWNET) == 0 || unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) {
    report.network_namespace = true;
  } else {
    report.warnings += fmt::format("no network namespace ({}); sockets are denied by the seccomp filter alone\n",
                                   std::strerror(errno));
  }

  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return internal_error(fmt::format("cannot set no_new_privs: {}", std::strerror(errno)));
  int abi = landlock_abi_version();
  if (abi > 0) {
    TF_RETURN_IF_ERROR(confine_files(scratch_dir, abi));
    report.landlock_abi = abi;
  } else {
    report.warnings +=
        "this kernel (or emulator) has no Landlock: kernels may write outside the scratch directory and read "
        "whatever this user can (keep the agent's token and TLS key unreadable to the agent's user, or run the agent "
        "under its own)\n";
  }
  // A kernel built without seccomp filters says ENOSYS or EINVAL; so does qemu-user, which
  // cannot let a filter of the emulated program bind the emulator's own system calls. Any other
  // refusal is a sandbox that should have worked and did not.
  int error = install_seccomp_filter();
  if (error == ENOSYS || error == EINVAL) {
    report.warnings += fmt::format(
        "no seccomp filter ({}: this kernel or emulator does not offer one): kernels may open sockets, start "
        "programs and signal this user's other processes (run the agent under a user of its own)\n",
        std::strerror(error));
  } else if (error != 0) {
    return internal_error(fmt::format("cannot install the worker's seccomp filter: {}", std::strerror(error)));
  } else {
    report.seccomp = true;
  }
  return report;
}

Status limit_cpu_time(double seconds) {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0)
    return internal_error(fmt::format("cannot read the worker's CPU time: {}", std::strerror(errno)));
  double used = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  rlimit limit{};
  getrlimit(RLIMIT_CPU, &limit);
  // Only the soft limit moves: the hard one could never be raised again for the next candidate.
  limit.rlim_cur = static_cast<rlim_t>(std::ceil(used + seconds));
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_cur > limit.rlim_max) limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_CPU, &limit) != 0)
    return internal_error(fmt::format("cannot limit the worker's CPU time: {}", std::strerror(errno)));
  return Status();
}

std::string format_limit_flag(const char* name, uint64_t value) { return fmt::format("--{}={}", name, value); }

bool parse_limit_flag(const std::string& arg, SandboxLimits& limits) {
  auto value_of = [&arg](const std::string& prefix, uint64_t& out) {
    if (arg.rfind(prefix, 0) != 0) return false;
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(arg.c_str() + prefix.size(), &end, 10);
    if (errno != 0 || end == arg.c_str() + prefix.size() || *end != '\0') return false;
    out = v;
    return true;
  };
  return value_of("--memory-bytes=", limits.memory_bytes) || value_of("--file-bytes=", limits.file_bytes) ||
         value_of("--cpu-seconds=", limits.cpu_seconds);
}

}  // namespace tunefarm
