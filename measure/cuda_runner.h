// The CUDA runner: loads a PTX artifact through the driver API, launches it with the artifact's
// grid and block dimensions and times it with events. libcuda.so.1 is opened at run time, never
// linked, so the same binary starts on boards without a GPU and reports "no CUDA device" there.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "measure/kernel.h"
#include "tunefarm/v1/common.pb.h"

namespace tunefarm {

// The name of device 0, or UNAVAILABLE with a message starting "no CUDA device" that says why
// (no driver library, driver initialisation failed, no device).
StatusOr<std::string> cuda_device_name();

// The PTX of the kernel that clears the L2 cache between timed runs (tests check it with ptxas).
const char* l2_clearing_ptx();

// Copies the host tensors to the device and loads the PTX. A PTX that does not load or lacks its
// entry is an error for a LOAD_ERROR; no device is UNAVAILABLE.
StatusOr<std::unique_ptr<BoundKernel>> bind_cuda_kernel(const v1::Artifact& artifact, std::vector<HostTensor>& tensors);

}  // namespace tunefarm
