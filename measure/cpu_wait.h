// What the kernel's scheduler counts for the measurer and the process that runs a candidate,
// read from outside that process, so that the candidate cannot change it: how long a thread was
// runnable but waited for a CPU (the second field of /proc/.../schedstat), and the CPU time of
// the candidate's whole process. On a machine shared with other work, the time a timing step
// takes as the measurer sees it includes the slices others held the CPU for, while the worker
// waited to be woken, was preempted, or the measurer waited to read the reply; subtracting those
// waits leaves what the candidate's own runs took, and no figure the candidate reports counts.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <string>

namespace tunefarm {

class CpuWait {
 public:
  // Watches the calling thread and the process that runs the kernel of the worker `worker_pid`
  // (the worker itself, or its grandchild inside a PID namespace: measure/sandbox.cc). Where
  // the kernel offers no schedstat, waits() stays 0 and nothing is subtracted.
  explicit CpuWait(pid_t worker_pid);
  ~CpuWait();
  CpuWait(const CpuWait&) = delete;
  CpuWait& operator=(const CpuWait&) = delete;

  // Seconds this thread and the kernel's main thread have waited for a CPU so far.
  double waits() const;
  // CPU seconds of the kernel's process, all its threads; 0 where it cannot be read.
  double cpu_seconds() const;
  // CPUs this thread may run on, which the worker inherited: how many of its threads can run at once.
  int cpus() const { return cpus_; }
  // Threads of the kernel's process now, at least 1: how many CPUs its CPU time can have used at
  // once. Threads a candidate starts and ends inside a step only make this smaller, which holds
  // its figure to more of its CPU time, never less.
  int threads() const;

 private:
  int self_ = -1;
  int kernel_ = -1;
  int status_ = -1;
  bool have_cpu_clock_ = false;
  clockid_t cpu_clock_{};
  int cpus_ = 1;
};

// The run_delay of a schedstat line, in seconds; 0 when `text` is not one.
double schedstat_wait_seconds(const std::string& text);

}  // namespace tunefarm
