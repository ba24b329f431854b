// Kernel libraries: tuned kernels compiled into what a C or C++ program links. For a CPU target,
// lib<name>.so and lib<name>.a with the kernel runtime inside (its symbols kept private, so two
// libraries can live in one program), and <name>.h with one documented C function per kernel; for
// CUDA, the same functions launch the kernels' PTX through the driver API.
// LLVM-free, like build.h; the system's C/C++ tools for the target do the linking
// (codegen::find_toolchain).
#pragma once

#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "common/target.h"
#include "common/workload.h"

namespace tunefarm {

struct LibraryKernel {
  Workload workload;
  Config config;
  std::vector<std::string> notes;  // More lines for the function's comment (where the config came from).
};

struct LibraryFile {
  std::string name;  // A plain file name, no directories.
  std::string content;
};

// Library names are C identifiers of at most 64 characters: they prefix every symbol.
Status check_library_name(const std::string& name);

// The C function for a workload: "<library>_<op>_<param><value>_...", e.g.
// mylib_matmul_M512_N512_K512.
std::string library_function_name(const std::string& library, const Workload& workload);

// Compiles `kernels` (distinct workloads, valid configs) for `target` into <name>.h, lib<name>.a and
// lib<name>.so; for CUDA, the libraries are host launchers with the kernels' PTX inside (loading
// the driver with dlopen), and each kernel's PTX comes beside them as <function>.ptx.
StatusOr<std::vector<LibraryFile>> build_kernel_library(const std::string& name, const Target& target,
                                                        const std::vector<LibraryKernel>& kernels);

// The pieces of a CPU library: compiled objects, the global symbols of theirs that stay private
// (the kernels' entries), and the C source of the library's interface with its header (the source
// may include "<name>.h" and "compiler/runtime/kernel_runtime.h"). The kernel runtime is added.
struct LibraryObjects {
  std::vector<std::string> objects;
  std::vector<std::string> private_symbols;
  std::string c_source;
  std::string header;
};

// Links the pieces into lib<name>.a and lib<name>.so for `target` (a CPU target), with the system
// tools for it; only the interface's symbols stay global.
StatusOr<std::vector<LibraryFile>> link_cpu_library(const std::string& name, const Target& target,
                                                    const LibraryObjects& parts);

}  // namespace tunefarm
