// Code generation from the loop IR with LLVM 16. The header is LLVM-free on purpose: it is
// included by the build API and by tests.
//
// CPU targets (host x86-64 with its full feature set, aarch64-linux-gnu, ...) produce a
// position-independent ELF object whose entry follows the kernel ABI of
// compiler/runtime/kernel_runtime.h: `int32_t entry(void* const* args)`. Parallel loops call
// tunefarm_parallel_launch with an outlined body; large scratch buffers come from
// tunefarm_workspace_alloc. The object becomes a shared object with the system linker, or runs
// in-process through an ORC JIT.
//
// CUDA targets produce PTX for one kernel `entry(float* arg0, ...)` and its launch dimensions,
// read from the loops bound to blockIdx/threadIdx.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/target.h"
#include "compiler/ir/ir.h"
#include "compiler/ops/cpu_model.h"

namespace tunefarm::codegen {

// Whether LLVM can build for `target` without aborting: a known triple of a supported architecture,
// a CPU and features from LLVM's tables, and the baseline features the kernels assume. Every path
// that builds code checks it first; services call it to refuse a target at submit.
Status check_target(const Target& target);

// The vectors and caches of the target's CPU, for the templates' defaults (compiler/ops/cpu_model.h);
// the AVX-512 model of ops::CpuModel{} for targets that are not CPUs or that check_target refuses.
ops::CpuModel cpu_model(const Target& target);

StatusOr<std::string> compile_object(const ir::LoweredFunc& f, const Target& target, const std::string& entry);

// Links a position-independent object of an llvm target into a shared object (LLD, in this
// process) and returns the shared object's bytes.
StatusOr<std::string> link_shared_object(const std::string& object, const Target& target);

// The system tools that build a kernel library for a target: the host's (cc, c++, ld, ar,
// objcopy) or the cross tools named after the triple (aarch64-linux-gnu-gcc, ...), as full paths.
struct Toolchain {
  std::string cc, cxx, ld, ar, objcopy;
};
StatusOr<Toolchain> find_toolchain(const Target& target);

// Runs a tool (argv[0] a full path) to completion; an error with the end of its stderr if it fails.
Status run_tool(const std::vector<std::string>& argv);

struct PtxKernel {
  std::string ptx;
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
};
StatusOr<PtxKernel> compile_ptx(const ir::LoweredFunc& f, const Target& target, const std::string& entry);

// LLVM IR text, as generated or after optimization, for inspection.
StatusOr<std::string> emit_llvm_ir(const ir::LoweredFunc& f, const Target& target, const std::string& entry,
                                   bool optimized = true);

using KernelFn = int32_t (*)(void* const*);

// A kernel compiled into this process. Symbols of the kernel runtime resolve from the process.
class JitKernel {
 public:
  static StatusOr<std::unique_ptr<JitKernel>> create(const std::string& object, const std::string& entry);
  ~JitKernel();
  KernelFn fn() const { return fn_; }
  int32_t run(void* const* args) const { return fn_(args); }

 private:
  struct Impl;
  JitKernel() = default;
  std::unique_ptr<Impl> impl_;
  KernelFn fn_ = nullptr;
};

}  // namespace tunefarm::codegen
