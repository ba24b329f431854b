// A kernel loaded on some device and bound to its argument buffers. The CPU runner (shared
// objects through dlopen) and the CUDA runner (PTX through the driver API) both provide one, so
// that the correctness check and the timer are written once for both.
#pragma once

#include <vector>

#include "common/status.h"
#include "measure/tensors.h"

namespace tunefarm {

class BoundKernel {
 public:
  virtual ~BoundKernel() = default;
  // Runs once and waits; afterwards copy_outputs gives what it wrote.
  virtual Status run_once() = 0;
  // Brings the outputs into the host tensors (a no-op where the kernel writes host memory).
  virtual Status copy_outputs(std::vector<HostTensor>& host) = 0;
  // Seconds taken by `number` runs: on CPUs back to back, each on the next of several copies of the
  // arguments (measure/cpu_runner.cc says why); on GPUs the sum of each run's own time, each run
  // started with the L2 cache cleared (measure/cuda_runner.cc).
  virtual StatusOr<double> time_runs(int number) = 0;
  // Evicts the device's caches so that the next run starts cold.
  virtual void flush_cache() = 0;
};

}  // namespace tunefarm
