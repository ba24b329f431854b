// A test-only interpreter that runs a CUDA kernel's loop IR on the CPU with GPU semantics: one
// OS thread per GPU thread of a block, blocks one after another, shared memory per block and a
// real barrier for gpu.barrier(). It checks every access against its buffer's bounds. This is
// what validates the shared-memory schedules without a GPU.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/ir/ir.h"

namespace tunefarm::testing_util {

// args[i] holds the i-th kernel argument's elements.
Status interpret_gpu_kernel(const ir::LoweredFunc& f, const std::vector<float*>& args,
                            const std::vector<int64_t>& arg_sizes);

}  // namespace tunefarm::testing_util
