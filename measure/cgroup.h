// Per-candidate control groups, the sandbox's memory and process limits that the address-space
// cap and RLIMIT_NPROC miss: a cgroup's memory limit counts what a process holds in memfds, tmpfs
// files, System V and /dev/shm segments and pipe buffers as well as its heap, and its pids limit
// counts every thread and process in it whatever user they run as.
//
// The measurer makes one cgroup per worker before starting it, with the memory limit (no swap)
// and the pids limit set; the worker joins it as its first act, before it forks the namespace's
// processes or loads anything foreign (sandbox.h), so that everything the candidate starts is
// inside; after the worker is reaped the measurer reads whether the kernel's OOM killer acted
// there (the candidate's memory error), kills whatever is left and removes it.
//
// Where: cgroup v2 in this process's own cgroup, or in a delegated directory named by
// --cgroup (systemd: a service with Delegate=yes), which needs the memory and pids controllers
// in its cgroup.controllers. v2 lets controllers pass down only through cgroups without
// processes, so the process moves itself into <base>/agent, beside the workers' cgroups. cgroup v1
// (hybrid systems): directories under this process's own cgroup in the memory and pids
// hierarchies. Each process has one base directory, tunefarm-measure-<pid>; those of processes
// that are gone (an agent killed outright) are swept, with whatever still runs in them, when the
// next one starts.
//
// No CPU controller: a CFS quota throttles a kernel for the rest of a period once it has used its
// share, which shows up as jumps in the very timings being measured, and a quota loose enough
// never to throttle (every core for every period) bounds nothing. CPU time is bounded by the
// measurer's wall-clock timeout and RLIMIT_CPU instead.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace tunefarm {

struct CgroupLimits {
  uint64_t memory_bytes = 0;  // 0: none
  uint64_t pids = 0;          // Threads and processes together; 0: none
};

// One worker's cgroup: a directory per hierarchy (one on cgroup v2).
class WorkerCgroup {
 public:
  WorkerCgroup() = default;
  WorkerCgroup(int version, std::vector<std::string> dirs) : version_(version), dirs_(std::move(dirs)) {}

  // The directories a process joins by writing "0" to their cgroup.procs (join_cgroups).
  const std::vector<std::string>& dirs() const { return dirs_; }
  // Whether the kernel's OOM killer acted in it: something in it went past the memory limit
  // and could not be reclaimed.
  bool memory_limit_hit() const;
  // Kills whatever is still in it and removes it, waiting (up to about a second) for what it
  // killed to end; the error names what stays behind.
  Status remove();

 private:
  friend class CgroupManager;
  int version_ = 0;
  std::vector<std::string> dirs_;
};

class CgroupManager {
 public:
  // The manager of this process's cgroups, shared by its measurers: found (and stale cgroups of
  // processes that are gone swept) on the first call, kept while any holder keeps it. nullptr
  // where this process may not make cgroups, with `why_not` saying why and what the user can do.
  // `delegated`: a cgroup v2 directory to use instead of this process's own cgroup.
  static std::shared_ptr<CgroupManager> shared(const std::string& delegated, std::string& why_not);
  ~CgroupManager();
  CgroupManager(const CgroupManager&) = delete;
  CgroupManager& operator=(const CgroupManager&) = delete;

  // A fresh cgroup for one worker, with the limits set.
  StatusOr<WorkerCgroup> make(const CgroupLimits& limits);
  // Kills whatever is left in a worker's cgroup and removes it, now if it is empty already, else
  // once its processes have ended: a worker's namespace ends its processes after the worker
  // itself is reaped, and waiting for them would cost each candidate milliseconds. Cgroups left
  // so are removed by the next make() that finds them empty, or by drain().
  void release(WorkerCgroup& cgroup);
  // Removes every cgroup release() left, waiting up to about a second for each.
  Status drain();

  // E.g. "cgroup v1 memory and pids per candidate (512 MiB without swap, 64 tasks)".
  std::string describe(const CgroupLimits& limits) const;
  int version() const { return version_; }
  // Whether the memory limit holds swap too (v1 memsw, v2 memory.swap.max): where the kernel does
  // not account swap, a kernel's pages may go to swap beyond the limit.
  bool swap_counted() const;
  // This process's base directories, one per hierarchy.
  const std::vector<std::string>& bases() const { return bases_; }
  // The controllers in use: memory, pids, or both.
  const std::vector<std::string>& controllers() const { return controllers_; }

 private:
  CgroupManager(int version, std::vector<std::string> bases, std::vector<std::string> controllers)
      : version_(version), bases_(std::move(bases)), controllers_(std::move(controllers)) {}
  static StatusOr<std::unique_ptr<CgroupManager>> find(const std::string& delegated);

  int version_;
  std::string delegated_;  // What shared() was asked for.
  std::vector<std::string> bases_;
  std::vector<std::string> controllers_;
  std::mutex mutex_;
  uint64_t made_ = 0;
  std::vector<std::string> pending_;  // Released directories whose processes were still ending.
};

// Moves this process into each of `dirs` (a WorkerCgroup's): what the worker does first.
Status join_cgroups(const std::vector<std::string>& dirs);

// Moves process `pid` into each of `dirs`, as far as it can. The first move into a cgroup after a
// pause waits for an RCU grace period (8-22 ms on a loaded two-core guest, against 0.15 ms for the
// next): the measurer moves its worker while the worker is still starting up, so that the wait
// overlaps the exec instead of following it. The worker joins on its own all the same (its move
// is then cheap), so nothing depends on this one.
void move_into_cgroups(pid_t pid, const std::vector<std::string>& dirs);

// The prefix of every base directory, tunefarm-measure-<pid>.
inline constexpr const char* kCgroupPrefix = "tunefarm-measure-";

}  // namespace tunefarm
