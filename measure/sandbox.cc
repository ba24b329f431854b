#include "measure/sandbox.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "measure/cgroup.h"
#include "measure/worker_channel.h"

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

  // Refuses `nr` when its second argument (a command, compared as 32 bits) is one of `denied`.
  void deny_second_arg(long nr, const std::vector<uint32_t>& denied, int error) {
    load_nr();
    auto skip = static_cast<uint8_t>(denied.size() + 3);
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, skip));
    add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])));
    for (size_t i = 0; i < denied.size(); ++i) {
      auto to_deny = static_cast<uint8_t>(denied.size() - i);
      add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, denied[i], to_deny, 0));
    }
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<uint32_t>(error) & SECCOMP_RET_DATA)));
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

int install_seccomp_filter(bool private_ipc, bool address_space_capped, bool gpu) {
  FilterBuilder filter;
  // No network: no new sockets of any family (the channel to the agent was opened before exec),
  // and no io_uring, whose requests would bypass this filter. A GPU driver's initialisation opens
  // Unix sockets (and fails where it cannot): on a GPU board those alone are let through.
  if (gpu) filter.allow_only_first_arg(SYS_socket, {static_cast<uint32_t>(AF_UNIX)}, EACCES);
  else filter.deny(SYS_socket, EACCES);
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
  // No way out of its session and group, into which the measurer's kill reaches, and no signals by
  // way of signal-driven I/O, whose owner may be any process (F_SETOWN to the agent with F_SETSIG
  // set to SIGSTOP stopped it).
  filter.deny(SYS_setpgid, EPERM);
  filter.deny(SYS_setsid, EPERM);
  filter.deny_second_arg(SYS_fcntl, {F_SETOWN, F_SETOWN_EX, F_SETSIG}, EPERM);
  // No keystrokes into a terminal (TIOCSTI typed commands into the shell that started an agent).
  filter.deny_second_arg(SYS_ioctl, {TIOCSTI, TIOCLINUX}, EPERM);
  // Memory that the address-space cap does not count: a memfd is a file in memory. Without a cap
  // (a GPU board's) it is no more than malloc gives, and the CUDA driver needs one to initialise
  // (cuInit fails with CUDA_ERROR_OPERATING_SYSTEM where memfd_create is refused).
  if (address_space_capped) filter.deny(SYS_memfd_create, EPERM);
  // System V segments, queues and semaphores outlive the process that made them: in an IPC
  // namespace of its own they go with the namespace, without one they would pile up on the host,
  // candidate after candidate, each up to the memory limit.
  if (!private_ipc) {
    filter.deny(SYS_shmget, EPERM);
    filter.deny(SYS_msgget, EPERM);
    filter.deny(SYS_semget, EPERM);
  }
  // No new namespaces or mounts (a user namespace of its own would hand it capabilities there),
  // and none of the kernel's attack surface a tensor kernel has no use for.
  filter.deny(SYS_unshare, EPERM);
  filter.deny(SYS_setns, EPERM);
  filter.deny(SYS_mount, EPERM);
  filter.deny(SYS_umount2, EPERM);
  filter.deny(SYS_pivot_root, EPERM);
  filter.deny(SYS_chroot, EPERM);
  filter.deny(SYS_bpf, EPERM);
  filter.deny(SYS_userfaultfd, EPERM);
  filter.deny(SYS_keyctl, EPERM);
  filter.deny(SYS_add_key, EPERM);
  filter.deny(SYS_request_key, EPERM);
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
// A /proc of the sandbox's own shows no other process: all of it is readable then. A GPU driver
// reads the machine's PCI and NUMA layout in /sys; a CPU kernel needs only the CPU topology.
std::vector<std::string> readable_paths(bool private_proc, bool gpu) {
  std::vector<std::string> paths = {"/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/etc/ld.so.conf",
                                    "/etc/ld.so.conf.d", gpu ? "/sys" : "/sys/devices/system/cpu"};
  if (private_proc) {
    paths.push_back("/proc");
  } else {
    for (const char* p : {"/proc/driver", "/proc/self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat",
                          "/proc/devices", "/proc/sys"})
      paths.push_back(p);
  }
  std::vector<std::string> present;
  for (auto& p : paths) {
    std::error_code ec;
    // /proc/self must become this process's own directory: a rule follows the path it is given.
    auto resolved = std::filesystem::canonical(p, ec);
    if (!ec) present.push_back(resolved.string());
  }
  return present;
}

// The devices a kernel may open: those that the C library and GPU drivers use.
std::vector<std::string> usable_devices() {
  std::vector<std::string> devices;
  for (const char* name : {"null", "zero", "full", "random", "urandom"}) devices.push_back(std::string("/dev/") + name);
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/dev", ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.starts_with("nvidia")) devices.push_back(it->path().string());
  }
  std::vector<std::string> present;
  for (auto& d : devices)
    if (access(d.c_str(), F_OK) == 0) present.push_back(d);
  return present;
}

// Landlock wants the scratch directory by a path the process can open; "." once it is there.
Status confine_files(const std::string& scratch_dir, int abi, bool private_proc, bool gpu) {
  uint64_t handled = landlock_write_rights(abi) | kReadRights;
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = handled;
  int ruleset = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
  if (ruleset < 0) return internal_error(fmt::format("cannot create a Landlock ruleset: {}", std::strerror(errno)));
  Status s = allow_beneath(ruleset, scratch_dir, handled);
  // Devices are opened for writing by the C library and by GPU drivers, one by one: /dev as a whole
  // holds /dev/shm (other programs' shared memory) and terminals.
  for (const std::string& device : usable_devices())
    if (s.ok()) s = allow_beneath(ruleset, device, LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE);
  for (const std::string& path : readable_paths(private_proc, gpu))
    if (s.ok()) s = allow_beneath(ruleset, path, kReadRights);
  // A process names its threads by writing /proc/self/task/TID/comm (the CUDA driver does in cuInit,
  // and fails with CUDA_ERROR_OPERATING_SYSTEM where it cannot). The rule is this process's own
  // task directory, resolved here, in the process that runs the kernel: what it opens for writing
  // there concerns no process but itself.
  std::error_code ec;
  std::string tasks = std::filesystem::canonical("/proc/self/task", ec).string();
  if (s.ok() && !ec) s = allow_beneath(ruleset, tasks, kReadRights | LANDLOCK_ACCESS_FS_WRITE_FILE);
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

namespace {

constexpr uid_t kNobody = 65534;

Status write_file(const char* path, const std::string& text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return internal_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int err = errno;
  close(fd);
  if (!ok) return internal_error(fmt::format("cannot write {}: {}", path, std::strerror(err)));
  return Status();
}

Status mount_or_error(const char* source, const char* target, const char* type, unsigned long flags,
                      const std::string& data = "") {
  if (mount(source, target, type, flags, data.empty() ? nullptr : data.c_str()) == 0) return Status();
  // A remount (of / as private, say) names neither a type nor a source.
  const char* what = type ? type : source;
  return internal_error(what ? fmt::format("cannot mount {} on {}: {}", what, target, std::strerror(errno))
                             : fmt::format("cannot remount {}: {}", target, std::strerror(errno)));
}

// The kernel's view of the file system, in its own mount namespace: a fresh tmpfs as /tmp (its
// scratch directory, gone with the namespace whatever it leaves there, however deep), and a /dev
// of a few character devices (and GPUs), without /dev/shm or terminals. On failure every mount it
// made is taken away again, so that the worker falls back to the machine's view.
Status build_mount_view(const SandboxLimits& limits, uid_t owner, gid_t group) {
  TF_RETURN_IF_ERROR(mount_or_error(nullptr, "/", nullptr, MS_REC | MS_PRIVATE));
  int on_tmp = 0;
  bool on_dev = false;
  auto undo = [&](Status s) {
    if (on_dev) umount2("/dev", MNT_DETACH);
    for (; on_tmp > 0; --on_tmp) umount2("/tmp", MNT_DETACH);
    return s;
  };
  // Files on a tmpfs are memory that the address-space cap does not count: at most half of it.
  uint64_t size = limits.file_bytes;
  if (limits.memory_bytes > 0 && (size == 0 || size > limits.memory_bytes / 2)) size = limits.memory_bytes / 2;
  std::string tmp_options = fmt::format("mode=0700,uid={},gid={},nr_inodes=65536", owner, group);
  if (size > 0) tmp_options += fmt::format(",size={}", size);
  TF_RETURN_IF_ERROR(mount_or_error("tunefarm-scratch", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmp_options));
  ++on_tmp;
  if (limits.without & kWithoutPrivateDev) return Status();
  // Devices cannot be made in a user namespace, but existing ones can be bound: stage them on a
  // small tmpfs over the new /tmp, bind that over /dev, and take the staging mount away again.
  if (Status s = mount_or_error("tunefarm-dev", "/tmp", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=65536");
      !s.ok())
    return undo(s);
  ++on_tmp;
  for (const std::string& device : usable_devices()) {
    std::string target = "/tmp/" + std::filesystem::path(device).filename().string();
    // A device directory (a GPU board's /dev/nvidia-caps) is bound onto a directory, a device
    // onto a file: a bind onto the other kind fails.
    bool directory = std::filesystem::is_directory(device);
    int fd = directory ? mkdir(target.c_str(), 0755) : open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return undo(internal_error(fmt::format("cannot stage {}: {}", device, std::strerror(errno))));
    if (!directory) close(fd);
    if (Status s = mount_or_error(device.c_str(), target.c_str(), nullptr, MS_BIND | (directory ? MS_REC : 0)); !s.ok())
      return undo(s);
  }
  if (Status s = mount_or_error("/tmp", "/dev", nullptr, MS_BIND | MS_REC); !s.ok()) return undo(s);
  on_dev = true;
  // The staging tmpfs leaves /tmp, uncovering the scratch tmpfs beneath it.
  if (umount2("/tmp", MNT_DETACH) != 0)
    return undo(internal_error(fmt::format("cannot unmount the staging /dev: {}", std::strerror(errno))));
  --on_tmp;
  return Status();
}

// A child per namespace level waits for the next and ends the way it ended: its exit status, or
// the same signal, so that the measurer learns how the kernel died; its resource usage (the
// memory a kernel used) is counted for the waiter by the kernel. A PID namespace's init cannot
// die of its own signal, so it exits with 128 + the signal, which the level above turns back
// into the signal (`outside`). `parent`, when not 0, is the process that must stay this one's
// parent: without it the child is killed and this one ends.
volatile sig_atomic_t told_to_stop = 0;
void stop_requested(int) { told_to_stop = 1; }

[[noreturn]] void wait_and_end_alike(pid_t child, pid_t parent, bool outside) {
  // The measurer's SIGTERM (a timeout) ends the namespace from here, where its init can be reaped.
  if (outside) {
    struct sigaction action {};
    action.sa_handler = stop_requested;
    sigaction(SIGTERM, &action, nullptr);
  }
  // Where the kernel has pidfds, both ends are waited for at once; elsewhere (older kernels,
  // emulators) the parent is polled.
  int child_fd = parent != 0 ? static_cast<int>(syscall(SYS_pidfd_open, child, 0)) : -1;
  int parent_fd = child_fd >= 0 ? static_cast<int>(syscall(SYS_pidfd_open, parent, 0)) : -1;
  // SIGTERM is let in only while waiting, so that it cannot slip in just before the wait begins.
  sigset_t while_waiting;
  sigprocmask(SIG_SETMASK, nullptr, &while_waiting);
  if (parent_fd >= 0) {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, nullptr);
  }
  for (;;) {
    if (parent_fd >= 0) {
      pollfd ends[2] = {{child_fd, POLLIN, 0}, {parent_fd, POLLIN, 0}};
      ppoll(ends, 2, nullptr, &while_waiting);
    }
    int status = 0;
    pid_t done = waitpid(child, &status, parent != 0 ? WNOHANG : 0);
    if (done == child) {
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
      if (WIFSIGNALED(status) || (outside && code > 128 && code < 128 + NSIG)) {
        int sig = WIFSIGNALED(status) ? WTERMSIG(status) : code - 128;
        signal(sig, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, nullptr);
        raise(sig);
        _exit(128 + sig);
      }
      _exit(code);
    }
    if (done < 0 && errno != EINTR) _exit(1);
    if (told_to_stop) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      _exit(128 + SIGKILL);
    }
    if (parent != 0 && getppid() != parent) {
      kill(child, SIGKILL);
      _exit(1);
    }
    if (parent != 0 && parent_fd < 0) usleep(20000);
  }
}

// Enters new namespaces; false (with the reason in `warnings`) where the system refuses them. A
// root agent needs no user namespace; anyone else gets one in which it keeps its own uid.
// `private_view` says whether the private /dev and /tmp were made too. Once in the new PID
// namespace there is no way back: this process can start no thread (clone refuses CLONE_THREAD
// with EINVAL) and must fork into it, so a failed view still returns true.
bool enter_namespaces(bool root, const SandboxLimits& limits, uid_t owner, gid_t group, std::string& warnings,
                      bool& private_view) {
  private_view = false;
  uid_t uid = getuid();
  gid_t gid = getgid();
  int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | (root ? 0 : CLONE_NEWUSER);
  if (!limits.namespaces || unshare(flags) != 0) {
    warnings += fmt::format(
        "no {}PID and mount namespaces ({}): kernels see this machine's processes, /dev and /tmp as this user may, "
        "and their files are removed one by one\n",
        root ? "" : "user, ",
        limits.namespaces ? fmt::format("{}: a container without them, or an emulator", std::strerror(errno))
                          : std::string("turned off by --no-namespaces"));
    return false;
  }
  Status s;
  if (!root) {
    s = write_file("/proc/self/setgroups", "deny");
    if (s.ok()) s = write_file("/proc/self/uid_map", fmt::format("{} {} 1", uid, uid));
    if (s.ok()) s = write_file("/proc/self/gid_map", fmt::format("{} {} 1", gid, gid));
  }
  if (s.ok()) s = build_mount_view(limits, owner, group);
  if (!s.ok()) {
    warnings += fmt::format("no private /dev and /tmp ({}): kernels see this machine's /dev and /tmp as this user "
                            "may, and their files are removed one by one\n",
                            s.message());
    return true;
  }
  private_view = true;
  return true;
}

// Drops every privilege: a root agent's worker becomes nobody, anyone else loses the capabilities
// its user namespace gave it.
Status drop_privileges(bool root) {
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (root) {
    if (setgroups(0, nullptr) != 0 || setresgid(kNobody, kNobody, kNobody) != 0 ||
        setresuid(kNobody, kNobody, kNobody) != 0)
      return internal_error(fmt::format("cannot become the unprivileged user {}: {}", kNobody, std::strerror(errno)));
  }
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capset, &header, data) != 0)
    return internal_error(fmt::format("cannot drop the worker's capabilities: {}", std::strerror(errno)));
  return Status();
}

void close_inherited_descriptors() {
  // Whatever the agent opened without close-on-exec stops here; the worker keeps stdio and its channel.
  if (close_range(kWorkerChannelFd + 1, ~0u, 0) != 0) {
    long most = sysconf(_SC_OPEN_MAX);
    for (long fd = kWorkerChannelFd + 1; fd < (most > 0 ? most : 1024); ++fd) close(static_cast<int>(fd));
  }
}

}  // namespace

StatusOr<SandboxReport> enter_sandbox(const std::string& scratch_dir, const SandboxLimits& limits) {
  SandboxReport report;
  // Before any process is forked: whatever the worker starts is in the candidate's cgroup.
  TF_RETURN_IF_ERROR(join_cgroups(limits.cgroups));
  close_inherited_descriptors();
  // The measurer starts the worker in a session of its own; a worker started otherwise makes one.
  if (getsid(0) != getpid()) setsid();
  bool root = geteuid() == 0;
  bool nobody = root && !(limits.without & kWithoutNobody);
  uid_t owner = nobody ? kNobody : getuid();
  gid_t group = nobody ? kNobody : getgid();
  std::vector<std::string> layers;

  pid_t agent = getppid();
  report.scratch_dir = scratch_dir;
  report.namespaces = enter_namespaces(root, limits, owner, group, report.warnings, report.private_tmp);
  if (report.namespaces) {
    report.network_namespace = true;
    if (report.private_tmp) report.scratch_dir = "/tmp";
    layers.push_back(fmt::format("{}PID, {}network and IPC namespaces", root ? "" : "user, ",
                                 report.private_tmp ? "mount, " : ""));
    // This process stays outside the PID namespace; its child is the namespace's init, which
    // starts a session of its own and waits for the grandchild that runs the kernel. Neither
    // keeps the channel, so that the measurer sees the kernel's end at once.
    pid_t init = fork();
    if (init < 0) return internal_error(fmt::format("cannot start the namespace's init: {}", std::strerror(errno)));
    if (init > 0) {
      close(kWorkerChannelFd);
      wait_and_end_alike(init, agent, true);
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    setsid();
    // The init of a PID namespace ignores signals it has no handler for (SIGXCPU among them),
    // so the kernel runs one level down, where signals act as anywhere else.
    pid_t runner = fork();
    if (runner < 0) _exit(1);
    if (runner > 0) {
      close(kWorkerChannelFd);
      wait_and_end_alike(runner, 0, false);
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The namespace's own /proc: the machine's would show every process, and would name this one
    // by a pid other than getpid()'s (the CUDA driver names its threads through
    // /proc/<getpid()>/task/<tid>/comm and fails its initialisation where that is another process).
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0) {
      report.private_proc = true;
      layers.push_back("a /proc of its own");
    } else {
      report.warnings += fmt::format("no /proc of the namespace's own ({}): kernels see the machine's processes' "
                                     "/proc entries as this user may\n",
                                     std::strerror(errno));
    }
  } else {
    // A new network namespace has no interfaces but a loopback that is down. Without privileges it
    // takes a user namespace too; some kernels or containers allow neither.
    if (limits.namespaces && (unshare(CLONE_NEWNET) == 0 || unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0)) {
      report.network_namespace = true;
      layers.push_back("a network namespace");
    } else {
      report.warnings += fmt::format("no network namespace ({}); sockets are denied by the seccomp filter alone\n",
                                     limits.namespaces ? std::strerror(errno) : "turned off by --no-namespaces");
    }
  }
  if (chdir(report.scratch_dir.c_str()) != 0)
    return internal_error(
        fmt::format("cannot enter the scratch directory '{}': {}", report.scratch_dir, std::strerror(errno)));
  // A root agent's scratch directory becomes nobody's, whom the kernel runs as. Nobody reaches it
  // by no path (the measurer's directory above it is the agent's alone), only as the working
  // directory entered here: from now on the worker names it ".".
  if (root && !report.private_tmp && chown(".", owner, group) != 0)
    return internal_error(fmt::format("cannot hand the scratch directory to uid {}: {}", owner, std::strerror(errno)));
  if (!report.private_tmp) report.scratch_dir = ".";
  // Temporary files a kernel (or a GPU driver's cache) makes belong in the scratch directory.
  setenv("TMPDIR", report.scratch_dir.c_str(), 1);
  setenv("CUDA_CACHE_PATH", (report.scratch_dir + "/cuda-cache").c_str(), 1);

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
    else
      layers.push_back(fmt::format("{} MiB of address space", limits.memory_bytes >> 20));
  }
  // Threads count per user (per user namespace): enough for a parallel kernel on every core,
  // not enough to exhaust the board's pids. Without a namespace or a user of its own the count
  // would include the agent's threads, so it is left to the measurer's timeout.
  if (report.namespaces || root) {
    auto threads = static_cast<rlim_t>(std::max(256u, 4 * std::thread::hardware_concurrency()));
    TF_RETURN_IF_ERROR(set_limit(RLIMIT_NPROC, threads, "threads"));
    layers.push_back(fmt::format("{} threads", threads));
  } else {
    report.warnings += "no thread cap: without a user namespace it would count the agent's own threads\n";
  }

  int abi = (limits.without & kWithoutLandlock) ? 0 : landlock_abi_version();
  TF_RETURN_IF_ERROR(drop_privileges(nobody));
  report.uid = geteuid();
  layers.push_back(fmt::format("uid {} without capabilities", report.uid));
  if (root && !nobody)
    report.warnings += "kernels run as root, without capabilities (turned off by --sandbox-without nobody): they may "
                       "read and write what root's files allow\n";
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return internal_error(fmt::format("cannot set no_new_privs: {}", std::strerror(errno)));
  if (abi > 0) {
    TF_RETURN_IF_ERROR(confine_files(".", abi, report.private_proc, limits.gpu != 0));
    report.landlock_abi = abi;
    layers.push_back(fmt::format("Landlock ABI {}", abi));
  } else if (limits.without & kWithoutLandlock) {
    report.warnings += "no Landlock (turned off by --sandbox-without landlock): kernels may write outside the scratch "
                       "directory and read whatever this user can\n";
  } else {
    report.warnings +=
        "this kernel (or emulator) has no Landlock: kernels may write outside the scratch directory and read "
        "whatever this user can (keep the agent's token and TLS key unreadable to the agent's user, or run the agent "
        "under its own)\n";
  }
  // A kernel built without seccomp filters says ENOSYS or EINVAL; so does qemu-user, which
  // cannot let a filter of the emulated program bind the emulator's own system calls. Any other
  // refusal is a sandbox that should have worked and did not.
  int error = (limits.without & kWithoutSeccomp)
                  ? -1
                  : install_seccomp_filter(report.namespaces, limits.memory_bytes > 0, limits.gpu != 0);
  if (error == -1) {
    report.warnings += "no seccomp filter (turned off by --sandbox-without seccomp): kernels may open sockets, start "
                       "programs and signal this user's other processes\n";
  } else if (error == ENOSYS || error == EINVAL) {
    report.warnings += fmt::format(
        "no seccomp filter ({}: this kernel or emulator does not offer one): kernels may open sockets, start "
        "programs and signal this user's other processes (run the agent under a user of its own)\n",
        std::strerror(error));
  } else if (error != 0) {
    return internal_error(fmt::format("cannot install the worker's seccomp filter: {}", std::strerror(error)));
  } else {
    report.seccomp = true;
    layers.push_back("seccomp filter");
  }
  for (size_t i = 0; i < layers.size(); ++i) report.layers += (i ? ", " : "") + layers[i];
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

StatusOr<uint64_t> sandbox_layer_bit(const std::string& name) {
  if (name == "landlock") return kWithoutLandlock;
  if (name == "seccomp") return kWithoutSeccomp;
  if (name == "nobody") return kWithoutNobody;
  if (name == "private-dev") return kWithoutPrivateDev;
  return invalid_argument(fmt::format("no sandbox layer '{}' (known: landlock, seccomp, nobody, private-dev)", name));
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
         value_of("--cpu-seconds=", limits.cpu_seconds) || value_of("--namespaces=", limits.namespaces) ||
         value_of("--without=", limits.without) || value_of("--gpu=", limits.gpu) ||
         (arg.starts_with("--cgroup=") && arg.size() > 9 && (limits.cgroups.push_back(arg.substr(9)), true));
}

}  // namespace tunefarm
