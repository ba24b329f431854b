// tunefarm-measure-worker: the sandbox. The measurer starts one for each artifact it measures, with
// a private scratch directory, and talks to it over fd 3 (worker_channel.h); everything that runs
// foreign code happens here, so a crash or a hang costs this process, never its parent, and
// nothing a kernel does outlives the request.
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "compiler/runtime/kernel_runtime.h"
#include "measure/sandbox.h"
#include "measure/worker.h"
#include "measure/worker_channel.h"

namespace {

// Die with the parent where no namespace does it: an orphaned worker (say, in a hanging kernel)
// would hold a core for nothing. PR_SET_PDEATHSIG would fire when the parent *thread* that
// started us ends, so poll instead.
void exit_with_parent(pid_t parent) {
  std::thread([parent] {
    for (;;) {
      if (getppid() != parent) _exit(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }).detach();
}

}  // namespace

int main(int argc, char** argv) {
  tunefarm::SandboxLimits limits;
  bool usage_ok = argc >= 3;
  for (int i = 3; usage_ok && i < argc; ++i) usage_ok = tunefarm::parse_limit_flag(argv[i], limits);
  if (!usage_ok) {
    std::fprintf(stderr,
                 "usage: %s SCRATCH_DIR PARENT_PID [--memory-bytes=N] [--file-bytes=N] [--cpu-seconds=N] [--namespaces=0|1] [--cgroup=DIR]... "
                 "(started by the measurement library)\n",
                 argv[0]);
    return 2;
  }
  pid_t parent = static_cast<pid_t>(std::atol(argv[2]));
  if (getppid() != parent) return 1;
  // Every glibc malloc arena reserves 64 MiB of address space, which an address-space cap counts.
  if (limits.memory_bytes > 0) mallopt(M_ARENA_MAX, 2);
  // The sandbox goes up before any thread starts, so that every thread is inside it.
  auto sandbox = tunefarm::enter_sandbox(argv[1], limits);
  if (!sandbox.ok()) {
    tunefarm::refuse_requests(tunefarm::kWorkerChannelFd, sandbox.status().message());
    return 0;
  }
  if (!sandbox->namespaces) exit_with_parent(parent);
  // Start the kernels' thread pool now rather than inside the first timed run; this call also
  // keeps the runtime library linked, so that loaded kernels find its symbols.
  tunefarm_runtime_num_threads();
  // The measurer logs the first line once, and each further line names a missing layer.
  std::string description = sandbox->layers + "\n" + sandbox->warnings;
  tunefarm::MeasureWorker(sandbox->scratch_dir, limits.cpu_seconds, tunefarm::limit_cpu_time, description)
      .serve(tunefarm::kWorkerChannelFd);
  return 0;
}
