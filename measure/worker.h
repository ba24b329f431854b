// What the measurement worker does with each request: load the candidate (and the reference, once
// per workload and seed), check the candidate's outputs, time it, and answer with a result. The
// worker's main (worker_main.cc) sets up the sandbox around one of these and serves its channel;
// tests drive the class in process over a socket pair.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "measure/kernel.h"
#include "measure/tensors.h"
#include "tunefarm/v1/tracker.pb.h"

namespace tunefarm {

class MeasureWorker {
 public:
  // Caps the CPU seconds the coming request may use; the sandboxed worker passes limit_cpu_time
  // (measure/sandbox.h), which would also bind a test process that drives the class.
  using CpuLimit = std::function<Status(double seconds)>;

  // Every request runs in a fresh directory inside `scratch_dir` (measure/scratch.h), which also
  // receives the artifacts to load. `cpu_seconds` per request, 0: its timeout times the cores,
  // plus one.
  MeasureWorker(std::string scratch_dir, uint64_t cpu_seconds, CpuLimit limit_cpu);

  // One request (a LeasedBatch with one candidate, or none to prepare the reference alone) and
  // its reply; every failure is a result with its error code. A candidate that leaves files the
  // worker cannot remove is a RUNTIME_ERROR.
  v1::MeasureResult handle(const v1::LeasedBatch& request);

  // Answers requests on `fd` (worker_channel.h) until the other side closes it or a reply cannot
  // be written.
  void serve(int fd);

 private:
  v1::MeasureResult handle_in_scratch(const v1::LeasedBatch& request);
  StatusOr<std::unique_ptr<BoundKernel>> bind(const v1::Artifact& artifact, std::vector<HostTensor>& tensors);
  StatusOr<const std::vector<std::string>*> reference_outputs(const v1::LeasedBatch& request,
                                                              const v1::MeasureOptions& options);

  std::string scratch_;
  uint64_t cpu_seconds_;
  CpuLimit limit_cpu_;
  std::string candidate_dir_;  // The current request's directory.
  uint64_t next_request_ = 0;
  uint64_t next_file_ = 0;
  // Reference outputs by reference_cache_key.
  std::map<std::string, std::vector<std::string>> cache_;
};

// Answers every request on `fd` with UNKNOWN and `why` until the other side closes it: a worker
// whose sandbox could not be set up runs no kernel, but its parent still learns the reason.
void refuse_requests(int fd, const std::string& why);

}  // namespace tunefarm
