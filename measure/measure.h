// The one implementation of measuring an artifact, shared by the device agent and the tuner's
// local runner. A Measurer starts a fresh sandbox process (tunefarm-measure-worker, sandbox.h) for
// every artifact it runs, reference or candidate, and kills it (with its namespace) afterwards:
// no candidate shares a process with another job's, and nothing one leaves behind (files,
// threads, an implant in the process's code) meets the next. What a candidate's process says is
// not trusted: its outputs are compared here with reference outputs that another process gave,
// its timings are accepted only within the time this process saw pass (less the waits for a CPU
// that the scheduler counted for this thread and the kernel's, cpu_wait.h), and a cost that is not a
// finite positive number, a forged or malformed reply, a crash or a hang are that candidate's
// result (RUNTIME_ERROR, WRONG_ANSWER or RUN_TIMEOUT) and nobody else's. The worker's output goes
// to a capped buffer, never to this process's log. Workers are started with posix_spawn, so a
// Measurer may live in a process that already runs gRPC threads.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "measure/cgroup.h"
#include "tunefarm/v1/common.pb.h"

struct rusage;

namespace tunefarm {
namespace v1 {
class LeasedBatch;
}

inline constexpr uint64_t kDefaultMaxArtifactBytes = 64ull << 20;

struct MeasurerOptions {
  // The worker binary; empty looks beside this program, in $TUNEFARM_BIN_DIR, then in ../bin.
  std::string worker_path;
  // A program that runs the worker, with its arguments, e.g. {"qemu-aarch64"} for an agent under
  // user-mode emulation on a machine without binfmt_misc; empty runs the worker itself.
  std::vector<std::string> worker_launcher;
  // Parent of the private scratch directory; empty uses $TMPDIR, else /tmp.
  std::string scratch_root;
  // The worker's address-space cap: negative picks three quarters of this machine's memory (at
  // least 2 GiB), 0 sets none (needed for CUDA, whose driver reserves vast address space).
  int64_t memory_limit_bytes = -1;
  // CPU seconds one candidate may use; 0 derives them from its timeout (sandbox.h).
  uint64_t cpu_seconds_per_candidate = 0;
  // Artifacts (candidates and references) larger than this are refused with LOAD_ERROR unrun.
  uint64_t max_artifact_bytes = kDefaultMaxArtifactBytes;
  // false: workers get no namespaces even where the system offers them (SandboxLimits::namespaces).
  bool namespaces = true;
  // Sandbox layers turned off (SandboxLimits::without).
  uint64_t sandbox_without = 0;
  // The board has a GPU (SandboxLimits::gpu).
  bool gpu = false;
  // Per-candidate cgroups (measure/cgroup.h): `cgroup` names a delegated cgroup v2 directory to
  // make them in, empty looks for this process's own (v2, else v1); `cgroups` false makes none
  // even where the system offers them (sandbox_bench compares the two).
  std::string cgroup;
  bool cgroups = true;
  // Threads and processes one candidate's worker may have (its cgroup's pids.max); 0 picks
  // kDefaultPidsPerCandidate or 4 per core, whichever is more.
  uint64_t pids_per_candidate = 0;
};

inline constexpr uint64_t kDefaultPidsPerCandidate = 64;

// The probe kernel (measure/probe_kernel.c, a 32x32x32 matmul installed beside the worker) as a
// candidate of its workload, with its reference: what Measurer::self_test() measures, and what
// tests send to agents of another architecture, whose kernels this build cannot compile.
struct ProbeKernel {
  v1::Workload workload;
  v1::Artifact candidate;
  v1::Artifact reference;
};
// `path` is the probe kernel's shared object; NOT_FOUND says what to install when it is missing.
StatusOr<ProbeKernel> load_probe_kernel(const std::string& path);

class Measurer {
 public:
  static StatusOr<std::unique_ptr<Measurer>> create(MeasurerOptions options = {});
  ~Measurer();
  Measurer(const Measurer&) = delete;
  Measurer& operator=(const Measurer&) = delete;

  // Measures one candidate; every outcome, including a crash or a hang, is a result. `reference`
  // may be null unless options.check_correctness is set. Not thread-safe: one call at a time.
  v1::MeasureResult measure(const v1::Workload& workload, const v1::MeasureOptions& options,
                            const v1::Artifact* reference, const v1::Artifact& candidate);

  // Measures the probe kernel that is installed beside the worker (measure/probe_kernel.c),
  // checked against its reference: FAILED_PRECONDITION with the reason when this sandbox cannot
  // run kernels at all (a memory limit too small for the worker, say), so that an agent can say
  // so at start instead of failing every candidate it is sent.
  Status self_test();

  // How many worker processes were started: one per artifact run.
  int worker_starts() const { return worker_starts_; }
  // Workers in a row that could not be started, or could not set up their sandbox (no candidate's
  // code had run in any of them); 0 once one starts. An agent runs self_test when it is not 0.
  int failed_starts() const { return failed_starts_; }
  const std::string& scratch_dir() const { return scratch_dir_; }
  // What the last worker said of its sandbox: the layers in place on the first line, then one
  // line per missing layer; empty before the first worker.
  const std::string& sandbox_description() const { return sandbox_; }
  // The per-candidate cgroups' parent directories, one per hierarchy; empty without cgroups.
  std::vector<std::string> cgroup_bases() const { return cgroups_ ? cgroups_->bases() : std::vector<std::string>{}; }

 private:
  struct Worker;

  Measurer(MeasurerOptions options, std::string scratch_dir)
      : options_(std::move(options)), scratch_dir_(std::move(scratch_dir)) {}

  // The worker's own description of its sandbox with the cgroup layer, which this process sets up.
  std::string with_cgroup_layer(const std::string& worker_description) const;

  StatusOr<Worker> start_worker();
  // Kills the worker (and its namespace) and removes its scratch directory; with `died`, first
  // gives a worker that is ending on its own a moment, and says how it ended.
  std::string stop_worker(Worker& worker, bool* died = nullptr, ::rusage* usage = nullptr);
  // How a worker that died while running a kernel ended, with the memory it had used.
  std::string describe_death(int wait_status, const ::rusage& usage) const;
  // Runs one artifact in a fresh worker: the outputs of a reference (into `outputs`), or the
  // checked and timed result of a candidate (against `expected`, when not null).
  v1::MeasureResult run(const v1::LeasedBatch& request, const v1::MeasureOptions& options,
                        const std::vector<std::string>* expected, std::vector<std::string>* outputs);
  std::optional<v1::MeasureResult> converse(Worker& worker, const v1::LeasedBatch& request, const v1::MeasureOptions& options,
                             int64_t deadline_ms, const std::vector<std::string>* expected,
                             std::vector<std::string>* outputs);
  // The request's reference outputs, run once per workload, reference and seed; a failure is kept
  // too, so that a reference that crashes is not run again for every candidate.
  struct Reference {
    std::string identity;  // What the key stands for, compared in full: a key alone could collide.
    v1::MeasureResult outcome;
    std::vector<std::string> outputs;
    // Its worker could not start: this says nothing of the reference, which runs again next time.
    bool worker_failed = false;
  };
  const Reference& prepare_reference(const v1::LeasedBatch& request, const v1::MeasureOptions& options);
  v1::MeasureResult measure_checked(const v1::Workload& workload, const v1::MeasureOptions& options,
                                    const v1::Artifact* reference, const v1::Artifact& candidate);

  // worker_path and memory_limit_bytes resolved.
  MeasurerOptions options_;
  std::string scratch_dir_;
  int worker_starts_ = 0;
  int failed_starts_ = 0;
  std::string sandbox_;
  std::map<std::string, Reference> references_;
  // Null where this process may make no cgroups; then cgroup_warning_ says why.
  std::shared_ptr<CgroupManager> cgroups_;
  CgroupLimits cgroup_limits_;
  std::string cgroup_warning_;
};

// Finds tunefarm-measure-worker as MeasurerOptions describes; NOT_FOUND names where it looked.
StatusOr<std::string> find_measure_worker();

}  // namespace tunefarm
