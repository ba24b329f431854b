// What the measurement worker does for the one artifact it is started for (a candidate, or a
// reference whose outputs are wanted): load it, run it once and send back its outputs, then time
// it step by step as the measurer asks. The worker checks nothing and keeps nothing: once foreign
// code is loaded, everything in this process is the candidate's to change, so the comparison with
// the reference and the acceptance of timings happen in the measurer (measure.h), and the process
// ends with the request. The worker's main (worker_main.cc) sets up the sandbox around one of
// these; tests drive the class in process over a socket pair.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "measure/kernel.h"
#include "measure/tensors.h"
#include "tunefarm/v1/tracker.pb.h"
#include "tunefarm/v1/worker.pb.h"

namespace tunefarm {

class MeasureWorker {
 public:
  // Caps the CPU seconds the request may use; the sandboxed worker passes limit_cpu_time
  // (measure/sandbox.h), which would also bind a test process that drives the class.
  using CpuLimit = std::function<Status(double seconds)>;

  // The artifact is written into `scratch_dir`. `cpu_seconds` for the request, 0: its timeout
  // times the cores, plus one. `sandbox` describes the layers around this process, for the first
  // report.
  MeasureWorker(std::string scratch_dir, uint64_t cpu_seconds, CpuLimit limit_cpu, std::string sandbox = "");

  // Reads one request (a LeasedBatch with one candidate, or none to run the reference), answers
  // with a WorkerReport (the outputs, or the failure), then answers each WorkerStep until the
  // other side closes the channel or a failure has been reported.
  void serve(int fd);

 private:
  StatusOr<std::unique_ptr<BoundKernel>> bind(const v1::Artifact& artifact, std::vector<HostTensor>& tensors,
                                              int64_t rotation_bytes);

  std::string scratch_;
  uint64_t cpu_seconds_;
  CpuLimit limit_cpu_;
  std::string sandbox_;
};

// Answers a request with UNKNOWN and `why`: a worker whose sandbox could not be set up runs no
// kernel, but its parent still learns the reason.
void refuse_requests(int fd, const std::string& why);

}  // namespace tunefarm
