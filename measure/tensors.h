// Host buffers for a kernel's tensor arguments: allocation from the artifact's argument list,
// deterministic filling from the measurement seed (so the candidate and the reference see the same
// inputs on every board), and the tolerance check of outputs against the reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "measure/tolerance.h"
#include "tunefarm/v1/common.pb.h"

namespace tunefarm {

// One dense, 64-byte aligned tensor.
struct HostTensor {
  v1::TensorArg arg;
  int64_t elements = 0;
  int64_t bytes = 0;
  std::unique_ptr<std::byte, void (*)(void*)> data{nullptr, &std::free};
};

// Largest total size of one kernel's arguments that the agent will allocate.
inline constexpr int64_t kMaxArgumentBytes = int64_t{4} << 30;

// Allocates one buffer per argument; rejects empty or negative shapes, unknown dtypes and sizes
// over the limits, naming the argument.
StatusOr<std::vector<HostTensor>> allocate_tensors(const google::protobuf::RepeatedPtrField<v1::TensorArg>& args);

// Inputs get values drawn from `seed` (the same seed gives the same values everywhere); outputs
// are zeroed.
void fill_tensors(std::vector<HostTensor>& tensors, uint64_t seed);

// The outputs' bytes, in argument order: what a reference run leaves for later comparisons.
std::vector<std::string> output_bytes(const std::vector<HostTensor>& tensors);

// OK when every output element is within `tolerance` of the reference (measure/tolerance.h);
// otherwise an error naming the first differing element and how many differ.
Status compare_outputs(const std::vector<HostTensor>& tensors, const std::vector<std::string>& expected,
                       const Tolerance& tolerance);

// The same check on output bytes alone (as output_bytes gives them), for a measurer that compares
// outside the process that ran the kernel: `args` are the kernel's arguments, outputs among them.
Status compare_output_bytes(const google::protobuf::RepeatedPtrField<v1::TensorArg>& args,
                            const std::vector<std::string>& actual, const std::vector<std::string>& expected,
                            const Tolerance& tolerance);

}  // namespace tunefarm
