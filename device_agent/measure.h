// The one implementation of measuring an artifact, shared by the device agent and the tuner's
// local runner. A Measurer owns a long-lived sandbox process (tunefarm-measure-worker) that loads
// each candidate from a private scratch directory; a candidate that crashes or hangs costs that
// process (it is killed and started again for the next candidate) and comes back as a result with
// RUNTIME_ERROR or RUN_TIMEOUT. The worker is started with posix_spawn, so a Measurer may live in
// a process that already runs gRPC threads.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "tunefarm/v1/common.pb.h"

namespace tunefarm {
namespace v1 {
class LeasedBatch;
}

struct MeasurerOptions {
  // The worker binary; empty looks beside this program, in $TUNEFARM_BIN_DIR, then in ../bin.
  std::string worker_path;
  // Parent of the private scratch directory; empty uses $TMPDIR, else /tmp.
  std::string scratch_root;
};

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

  // How many times a worker process was started (it is restarted after each crash or timeout).
  int worker_starts() const { return worker_starts_; }
  const std::string& scratch_dir() const { return scratch_dir_; }

 private:
  Measurer(std::string worker_path, std::string scratch_dir)
      : worker_path_(std::move(worker_path)), scratch_dir_(std::move(scratch_dir)) {}

  Status start_worker();
  // Kills the worker and says how it ended when it had already died.
  std::string stop_worker();
  // One request and its reply within `timeout_s`; a lost worker becomes a result.
  v1::MeasureResult exchange(const v1::LeasedBatch& request, double timeout_s);
  // Has the worker run and cache the request's reference; the outcome is kept per reference.
  const v1::MeasureResult& prepare_reference(const v1::LeasedBatch& request);
  v1::MeasureResult measure_checked(const v1::Workload& workload, const v1::MeasureOptions& options,
                                    const v1::Artifact* reference, const v1::Artifact& candidate);

  std::string worker_path_;
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
