#include "compiler/library.h"

#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "common/temp_dir.h"
#include "compiler/build.h"
#include "compiler/c_source.h"
#include "compiler/codegen/codegen.h"

namespace tunefarm {

// The kernel runtime's sources, embedded at build time (runtime_sources.cc.in), so that a library
// is built for any target the installed tools reach, without the source tree.
namespace runtime_sources {
extern const char kHeader[];
extern const char kSource[];
}  // namespace runtime_sources

namespace {

struct Declaration {
  std::string function;  // The public C function.
  std::string entry;     // The kernel's own symbol, private to the library.
  std::vector<ops::TensorArg> args;
  std::string comment;
  // CUDA only: the kernel's PTX module and launch dimensions.
  std::string ptx;
  std::array<int64_t, 3> grid{1, 1, 1}, block{1, 1, 1};
};

std::string dims(const std::vector<int64_t>& shape) {
  std::string out;
  for (int64_t d : shape) out += fmt::format("[{}]", d);
  return out;
}

// The C parameters of a kernel's function: its tensors, and for CUDA the stream it is queued on.
std::string parameter_list(const std::vector<ops::TensorArg>& args, bool cuda) {
  std::string out;
  for (const auto& a : args) out += fmt::format("{}{}float* {}", out.empty() ? "" : ", ", a.is_output ? "" : "const ", a.name);
  return cuda ? out + ", void* stream" : out;
}

std::string header_text(const std::string& name, const Target& target, const std::vector<Declaration>& decls) {
  bool cuda = target.kind == Target::Kind::kCUDA;
  std::string E = c_source::upper(name);
  std::string guard = E + "_H_";
  std::string linking = cuda ? fmt::format(R"( * Link with lib{0}.so, or with lib{0}.a plus -ldl -lpthread. It needs no CUDA toolkit: it
 * loads the driver (libcuda.so.1) when a kernel is first called, and the kernels' PTX into the
 * calling thread's current context (device 0's primary context when there is none). Use one
 * context per process for this library.
 *
 * Tensors are dense float32 arrays in device memory (CUdeviceptr values cast to pointers), in the
 * layout each function names, the last dimension contiguous; outputs must not overlap inputs.
 * Kernels are queued on `stream` (a CUstream; NULL for the default stream) and run
 * asynchronously: synchronize before reading an output.)", name)
                             : fmt::format(R"( * Link with lib{0}.so, or with lib{0}.a plus -lstdc++ -lpthread -lm. The kernel runtime (a thread
 * pool) is inside the library with its symbols kept private.
 *
 * Tensors are dense float32 arrays in the layout each function names, the last dimension
 * contiguous; outputs must not overlap inputs. Kernels may run concurrently from several threads.)", name);
  std::string cuda_errors = cuda ? fmt::format(R"(
  {0}_ERROR_NO_CUDA = 4,              /* the CUDA driver or a device is missing */
  {0}_ERROR_CUDA = 5                  /* a CUDA driver call failed (e.g. a launch) */)", E) : "";
  std::string threads = cuda ? "" : fmt::format(R"(
/* Threads the kernels use, the calling thread included. 0 restores the default:
 * $TUNEFARM_NUM_THREADS, else the CPUs this process may run on. */
int {0}_set_num_threads(int num_threads);
int {0}_num_threads(void);
)", name);
  std::string out = fmt::format(R"(/* {0}.h: tuned kernels built by tunefarm (`tune-client build`) for target '{1}'.
 *
{4}
 * Every function returns {2}_OK (0) or an error code that {0}_error_string() describes.
 * See manifest.json beside this header for where each kernel's config came from.
 */
#ifndef {3}
#define {3}

#ifdef __cplusplus
extern "C" {{
#endif

enum {{
{7}{5}
}};

/* What an error code means, as a constant string. */
const char* {0}_error_string(int code);
{6})",
                                name, target.to_string(), E, guard, linking, cuda_errors, threads, c_source::error_codes(name));
  for (const auto& d : decls)
    out += fmt::format("\n{}\nint {}({});\n", d.comment, d.function, parameter_list(d.args, cuda));
  out += fmt::format(R"(
#ifdef __cplusplus
}}  /* extern "C" */
#endif

#endif /* {} */
)",
                     guard);
  return out;
}

// The library's C: the fixed part (library_c/kernels_api.c) around the generated tables and one
// public function per kernel, which checks its tensors and calls the kernel (CPU) or launches it
// (CUDA).
std::string api_source(const std::string& name, const std::vector<Declaration>& decls, bool cuda) {
  std::string E = c_source::upper(name);
  std::string tables = fmt::format("#define KERNELS_ON_CUDA {}\n", cuda ? 1 : 0);
  std::string functions;
  size_t max_args = 0;
  for (size_t i = 0; i < decls.size(); ++i) {
    const Declaration& d = decls[i];
    max_args = std::max(max_args, d.args.size());
    std::string checks, pointers;
    for (const auto& a : d.args) {
      checks += fmt::format("{}!{}", checks.empty() ? "" : " || ", a.name);
      pointers += fmt::format("{}({}){}", pointers.empty() ? "" : ", ", cuda ? "CUdeviceptr" : "void*", a.name);
    }
    std::string call = cuda ? fmt::format("  CUdeviceptr values[{}] = {{{}}};\n  return launch({}, values, {}, stream);\n",
                                          d.args.size(), pointers, i, d.args.size())
                            : fmt::format("  void* args[{}] = {{{}}};\n  return {}(args) == 0 ? {}_OK : {}_ERROR_OUT_OF_MEMORY;\n",
                                          d.args.size(), pointers, d.entry, E, E);
    if (!cuda) functions += fmt::format("\nint32_t {}(void* const* args);\n", d.entry);
    functions += fmt::format("\nint {}({}) {{\n  if ({}) return {}_ERROR_NULL_ARGUMENT;\n{}}}\n", d.function,
                             parameter_list(d.args, cuda), checks, E, call);
  }
  if (cuda) {
    std::string modules, entries, grids, blocks;
    for (const auto& d : decls) {
      modules += "    " + c_source::string_literal(d.ptx) + ",\n";
      entries += c_source::string_literal(d.entry) + ", ";
      grids += fmt::format("{{{}, {}, {}}}, ", d.grid[0], d.grid[1], d.grid[2]);
      blocks += fmt::format("{{{}, {}, {}}}, ", d.block[0], d.block[1], d.block[2]);
    }
    tables += fmt::format("enum {{ NUM_KERNELS = {}, MAX_KERNEL_ARGS = {} }};\n", decls.size(), max_args);
    tables += fmt::format("static const char* const kModules[NUM_KERNELS] = {{\n{}}};\n", modules);
    tables += fmt::format("static const char* const kEntries[NUM_KERNELS] = {{{}}};\n", entries);
    tables += fmt::format("static const unsigned kGrid[NUM_KERNELS][3] = {{{}}};\n", grids);
    tables += fmt::format("static const unsigned kBlock[NUM_KERNELS][3] = {{{}}};", blocks);
  }
  return c_source::instantiate(c_source::kKernelsApi, name, {{"TABLES", tables}, {"FUNCTIONS", functions}});
}

Status write_file(const std::string& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) return internal_error("cannot write " + path);
  return Status();
}

StatusOr<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (!in) return internal_error("cannot read " + path);
  return bytes.str();
}

}  // namespace

Status check_library_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 64 && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok)
    return invalid_argument(fmt::format("library name '{}' must be a C identifier of at most 64 characters "
                                        "(letters, digits, '_'; not starting with a digit)", name));
  return Status();
}

std::string library_function_name(const std::string& library, const Workload& workload) {
  std::string out = library + "_" + workload.op;
  std::string canonical = workload.to_string();
  std::string_view rest = std::string_view(canonical).substr(canonical.find(':') + 1);
  while (!rest.empty()) {
    std::string_view item = rest.substr(0, rest.find(','));
    rest = item.size() < rest.size() ? rest.substr(item.size() + 1) : std::string_view();
    size_t eq = item.find('=');
    out += fmt::format("_{}{}", item.substr(0, eq), eq == std::string_view::npos ? "" : item.substr(eq + 1));
  }
  return out;
}

StatusOr<std::vector<LibraryFile>> link_cpu_library(const std::string& name, const Target& target,
                                                    const LibraryObjects& parts) {
  TF_ASSIGN_OR_RETURN(codegen::Toolchain tools, codegen::find_toolchain(target));
  ScopedTempDir dir("", "tunefarm-library");
  TF_RETURN_IF_ERROR(dir.status());
  const std::string& d = dir.path();
  TF_RETURN_IF_ERROR(write_file(fmt::format("{}/{}.h", d, name), parts.header));
  TF_RETURN_IF_ERROR(write_file(d + "/api.c", parts.c_source));
  std::filesystem::create_directories(d + "/compiler/runtime");
  TF_RETURN_IF_ERROR(write_file(d + "/compiler/runtime/kernel_runtime.h", runtime_sources::kHeader));
  TF_RETURN_IF_ERROR(write_file(d + "/runtime.cc", runtime_sources::kSource));
  TF_RETURN_IF_ERROR(codegen::run_tool({tools.cc, "-std=c11", "-O2", "-fPIC", "-Wall", "-Werror", "-I", d, "-c", d + "/api.c",
                                        "-o", d + "/api.o"})
                         .with_context("compiling the library's C functions"));
  // Hidden: the runtime's functions become private to the library below (libstdc++'s own
  // templates keep their default visibility and merge as usual).
  TF_RETURN_IF_ERROR(codegen::run_tool({tools.cxx, "-std=c++17", "-O2", "-fPIC", "-pthread", "-fvisibility=hidden", "-I", d,
                                        "-c", d + "/runtime.cc", "-o", d + "/runtime.o"})
                         .with_context("compiling the kernel runtime"));
  std::vector<std::string> combine = {tools.ld, "-r", "-o", d + "/combined.o"};
  for (size_t i = 0; i < parts.objects.size(); ++i) {
    std::string path = fmt::format("{}/kernel_{}.o", d, i);
    TF_RETURN_IF_ERROR(write_file(path, parts.objects[i]));
    combine.push_back(path);
  }
  combine.push_back(d + "/api.o");
  combine.push_back(d + "/runtime.o");
  TF_RETURN_IF_ERROR(codegen::run_tool(combine).with_context("combining the library's objects"));
  std::string object = fmt::format("{}/{}.o", d, name);
  std::vector<std::string> localize = {tools.objcopy, "--localize-hidden"};
  for (const auto& symbol : parts.private_symbols) localize.push_back("--localize-symbol=" + symbol);
  localize.push_back(d + "/combined.o");
  localize.push_back(object);
  TF_RETURN_IF_ERROR(codegen::run_tool(localize).with_context("making the kernels' symbols private"));
  std::string archive = fmt::format("{}/lib{}.a", d, name), shared = fmt::format("{}/lib{}.so", d, name);
  TF_RETURN_IF_ERROR(codegen::run_tool({tools.ar, "rcsD", archive, object}).with_context("archiving"));
  TF_RETURN_IF_ERROR(codegen::run_tool({tools.cxx, "-shared", "-pthread", "-Wl,-soname,lib" + name + ".so", "-o", shared, object,
                                        "-lm"})
                         .with_context("linking the shared library"));
  std::vector<LibraryFile> files;
  TF_ASSIGN_OR_RETURN(std::string a, read_file(archive));
  files.push_back({"lib" + name + ".a", std::move(a)});
  TF_ASSIGN_OR_RETURN(std::string so, read_file(shared));
  files.push_back({"lib" + name + ".so", std::move(so)});
  return files;
}

namespace {

// CUDA: a host library of launchers with the PTX inside, and each kernel's PTX beside it.
StatusOr<std::vector<LibraryFile>> link_cuda_library(const std::string& name, const Target& target,
                                                     const std::vector<Declaration>& decls, const std::string& header) {
  TF_ASSIGN_OR_RETURN(codegen::Toolchain tools, codegen::find_toolchain(target));
  ScopedTempDir dir("", "tunefarm-library");
  TF_RETURN_IF_ERROR(dir.status());
  const std::string& d = dir.path();
  TF_RETURN_IF_ERROR(write_file(fmt::format("{}/{}.h", d, name), header));
  TF_RETURN_IF_ERROR(write_file(d + "/api.c", api_source(name, decls, true)));
  TF_RETURN_IF_ERROR(codegen::run_tool({tools.cc, "-std=c11", "-O2", "-fPIC", "-Wall", "-Werror", "-I", d, "-c", d + "/api.c",
                                        "-o", d + "/api.o"})
                         .with_context("compiling the library's launchers"));
  std::string archive = fmt::format("{}/lib{}.a", d, name), shared = fmt::format("{}/lib{}.so", d, name);
  TF_RETURN_IF_ERROR(codegen::run_tool({tools.ar, "rcsD", archive, d + "/api.o"}).with_context("archiving"));
  TF_RETURN_IF_ERROR(codegen::run_tool({tools.cc, "-shared", "-Wl,-soname,lib" + name + ".so", "-o", shared, d + "/api.o",
                                        "-ldl", "-lpthread"})
                         .with_context("linking the shared library"));
  std::vector<LibraryFile> files;
  TF_ASSIGN_OR_RETURN(std::string a, read_file(archive));
  files.push_back({"lib" + name + ".a", std::move(a)});
  TF_ASSIGN_OR_RETURN(std::string so, read_file(shared));
  files.push_back({"lib" + name + ".so", std::move(so)});
  for (const auto& decl : decls) files.push_back({decl.function + ".ptx", decl.ptx});
  return files;
}

}  // namespace

StatusOr<std::vector<LibraryFile>> build_kernel_library(const std::string& name, const Target& target,
                                                        const std::vector<LibraryKernel>& kernels) {
  TF_RETURN_IF_ERROR(check_library_name(name));
  if (kernels.empty()) return invalid_argument("a library needs at least one workload");
  TF_RETURN_IF_ERROR(codegen::check_target(target));
  // The tools are looked for first, so that a missing one is reported before anything compiles.
  TF_RETURN_IF_ERROR(codegen::find_toolchain(target).status());
  bool cuda = target.kind == Target::Kind::kCUDA;

  std::vector<Declaration> decls;
  std::vector<std::string> objects;
  std::set<std::string> functions;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const LibraryKernel& k = kernels[i];
    Declaration decl;
    decl.function = library_function_name(name, k.workload);
    if (!functions.insert(decl.function).second)
      return invalid_argument(fmt::format("workload {} is given twice", k.workload.to_string()));
    decl.entry = fmt::format("{}__kernel_{}", name, i);
    TF_ASSIGN_OR_RETURN(decl.args, kernel_args(k.workload));
    auto lowered = lower_candidate(k.workload, target, k.config);
    if (!lowered.ok()) return lowered.status().with_context(k.workload.to_string());
    if (cuda) {
      TF_ASSIGN_OR_RETURN(codegen::PtxKernel ptx, codegen::compile_ptx(*lowered, target, decl.entry));
      decl.ptx = std::move(ptx.ptx);
      decl.grid = ptx.grid;
      decl.block = ptx.block;
    } else {
      TF_ASSIGN_OR_RETURN(std::string object, codegen::compile_object(*lowered, target, decl.entry));
      objects.push_back(std::move(object));
    }
    decl.comment = fmt::format("/* {}\n", k.workload.to_string());
    for (const auto& a : decl.args)
      decl.comment += fmt::format(" *   {:<7} float32{}{}{}\n", a.name, dims(a.shape), a.layout.empty() ? "  row-major" : "  " + a.layout,
                                  a.is_output ? "  (written)" : "");
    if (cuda)
      decl.comment += fmt::format(" *   launch: grid ({}, {}, {}), block ({}, {}, {})\n", decl.grid[0], decl.grid[1], decl.grid[2],
                                  decl.block[0], decl.block[1], decl.block[2]);
    for (const auto& note : k.notes) decl.comment += fmt::format(" *   {}\n", note);
    decl.comment += " */";
    decls.push_back(std::move(decl));
  }

  std::string header = header_text(name, target, decls);
  StatusOr<std::vector<LibraryFile>> files = std::vector<LibraryFile>();
  if (cuda) {
    files = link_cuda_library(name, target, decls, header);
  } else {
    LibraryObjects parts{objects, {}, api_source(name, decls, false), header};
    for (const auto& decl : decls) parts.private_symbols.push_back(decl.entry);
    files = link_cpu_library(name, target, parts);
  }
  if (!files.ok()) return files.status();
  files->insert(files->begin(), LibraryFile{name + ".h", header});
  return files;
}

}  // namespace tunefarm
