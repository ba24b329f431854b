// The CPU runner: loads a shared-object artifact with dlopen and calls its entry point with the
// host tensors (kernel ABI of compiler/runtime/kernel_runtime.h). Runs inside the measurement
// worker, never in the agent itself, since the code it loads may crash.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "measure/kernel.h"
#include "tunefarm/v1/common.pb.h"

namespace tunefarm {

// `path` holds the artifact's bytes. Fails (for a LOAD_ERROR) when the object does not load or
// lacks the entry symbol. The tensors must outlive the returned kernel. Timed runs rotate over
// copies of the arguments that span `rotation_bytes` together (0: the default, 8 MiB or 4x L2).
// A model's job (`rotation_bytes` set and constant arguments) times each call on its own, with
// the candidate's code moved out of the core's caches first (to L2, where a model's other steps
// leave it), so that code grown by unrolling costs what it costs in the model.
StatusOr<std::unique_ptr<BoundKernel>> bind_cpu_kernel(const std::string& path, const v1::Artifact& artifact,
                                                       std::vector<HostTensor>& tensors, int64_t rotation_bytes = 0);

// The executable segment of the loaded object that holds `address`; empty when none does.
struct CodeSegment {
  uintptr_t begin = 0, end = 0;
};
CodeSegment code_segment_of(const void* address);

}  // namespace tunefarm
