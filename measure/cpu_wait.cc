#include "measure/cpu_wait.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

namespace tunefarm {
namespace {

// The process that runs the kernel: below the worker are at most a namespace's init and its
// child (sandbox.cc), and a kernel cannot start processes of its own (the seccomp filter denies
// fork), so the first process without children on the way down is the one.
pid_t kernel_process(pid_t worker) {
  pid_t pid = worker;
  for (int depth = 0; depth < 2; ++depth) {
    std::ifstream in(fmt::format("/proc/{}/task/{}/children", pid, pid));
    pid_t child = 0;
    if (!(in >> child) || child <= 0) break;
    pid = child;
  }
  return pid;
}

double read_wait(int fd) {
  if (fd < 0) return 0;
  char text[128];
  ssize_t n = pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return 0;
  return schedstat_wait_seconds(std::string(text, static_cast<size_t>(n)));
}

}  // namespace

double schedstat_wait_seconds(const std::string& text) {
  unsigned long long run_ns = 0, wait_ns = 0;
  if (std::sscanf(text.c_str(), "%llu %llu", &run_ns, &wait_ns) != 2) return 0;
  return static_cast<double>(wait_ns) * 1e-9;
}

CpuWait::CpuWait(pid_t worker_pid) {
  self_ = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  pid_t kernel = kernel_process(worker_pid);
  // The main thread runs the kernel (and the runtime's pool, when it has threads, helps it).
  kernel_ = open(fmt::format("/proc/{}/task/{}/schedstat", kernel, kernel).c_str(), O_RDONLY | O_CLOEXEC);
  status_ = open(fmt::format("/proc/{}/status", kernel).c_str(), O_RDONLY | O_CLOEXEC);
  have_cpu_clock_ = clock_getcpuclockid(kernel, &cpu_clock_) == 0;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) cpus_ = std::max(1, CPU_COUNT(&allowed));
}

CpuWait::~CpuWait() {
  if (self_ >= 0) close(self_);
  if (kernel_ >= 0) close(kernel_);
  if (status_ >= 0) close(status_);
}

int CpuWait::threads() const {
  if (status_ < 0) return 1;
  char text[4096];
  ssize_t n = pread(status_, text, sizeof text - 1, 0);
  if (n <= 0) return 1;
  text[n] = '\0';
  const char* line = std::strstr(text, "\nThreads:");
  int count = 0;
  if (!line || std::sscanf(line, "\nThreads: %d", &count) != 1) return 1;
  return std::max(1, count);
}

double CpuWait::waits() const {
  // Without the kernel process's CPU time, its waits are not subtracted: that time is what keeps
  // a kernel from hiding work in threads while its main thread waits (measure.cc).
  return read_wait(self_) + (have_cpu_clock_ ? read_wait(kernel_) : 0);
}

double CpuWait::cpu_seconds() const {
  timespec t{};
  if (!have_cpu_clock_ || clock_gettime(cpu_clock_, &t) != 0) return 0;
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace tunefarm
