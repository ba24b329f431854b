// The one implementation of measuring an artifact, shared by the device agent and the tuner's
// local runner. A Measurer owns a long-lived sandbox process (tunefarm-measure-worker) that runs
// each candidate in a fresh scratch directory of its own, emptied after it (measure/scratch.h),
// so that no candidate sees what an earlier one left; a candidate that crashes or hangs costs that
// process (it is killed and started again for the next candidate) and comes back as a result with
// RUNTIME_ERROR or RUN_TIMEOUT. The worker is started with posix_spawn, so a Measurer may live in
// a process that already runs gRPC threads.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
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
};

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

  // How many times a worker process was started (it is restarted after each crash or timeout).
  int worker_starts() const { return worker_starts_; }
  const std::string& scratch_dir() const { return scratch_dir_; }

 private:
  Measurer(MeasurerOptions options, std::string scratch_dir)
      : options_(std::move(options)), scratch_dir_(std::move(scratch_dir)) {}

  Status start_worker();
  // Kills the worker's process group and says how it ended when it had already died.
  std::string stop_worker();
  // How a worker that died while running a kernel ended, with the memory it had used.
  std::string describe_death(int wait_status, const ::rusage& usage) const;
  // One request and its reply within `timeout_s`; a lost worker becomes a result.
  v1::MeasureResult exchange(const v1::LeasedBatch& request, double timeout_s);
  // Has the worker run and cache the request's reference; the outcome is kept per reference.
  const v1::MeasureResult& prepare_reference(const v1::LeasedBatch& request);
  v1::MeasureResult measure_checked(const v1::Workload& workload, const v1::MeasureOptions& options,
                                    const v1::Artifact* reference, const v1::Artifact& candidate);

  // worker_path and memory_limit_bytes resolved.
  MeasurerOptions options_;
  std::string scratch_dir_;
  pid_t worker_pid_ = -1;
  int channel_fd_ = -1;
  int worker_starts_ = 0;
  // Outcome of preparing each reference (an OK result once its outputs are cached by the worker).
  std::map<std::string, v1::MeasureResult> references_;
};

// Finds tunefarm-measure-worker as MeasurerOptions describes; NOT_FOUND names where it looked.
StatusOr<std::string> find_measure_worker();

}  // namespace tunefarm
