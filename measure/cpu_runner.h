// The CPU runner: loads a shared-object artifact with dlopen and calls its entry point with the
// host tensors (kernel ABI of compiler/runtime/kernel_runtime.h). Runs inside the measurement
// worker, never in the agent itself, since the code it loads may crash.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "measure/kernel.h"
#include "tunefarm/v1/common.pb.h"

namespace tunefarm {

// `path` holds the artifact's bytes. Fails (for a LOAD_ERROR) when the object does not load or
// lacks the entry symbol. The tensors must outlive the returned kernel. Timed runs rotate over
// copies of the arguments that span `rotation_bytes` together (0: the default, 8 MiB or 4x L2).
StatusOr<std::unique_ptr<BoundKernel>> bind_cpu_kernel(const std::string& path, const v1::Artifact& artifact,
                                                       std::vector<HostTensor>& tensors, int64_t rotation_bytes = 0);

}  // namespace tunefarm
