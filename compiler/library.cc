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

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

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
  std::string guard = upper(name) + "_H_";
  std::string E = upper(name);
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
  std::string cuda_errors = cuda ? fmt::format(R"(,
  {0}_ERROR_NO_CUDA = 4,         /* the CUDA driver or a device is missing */
  {0}_ERROR_CUDA = 5             /* a CUDA driver call failed (e.g. a launch) */)", E) : "";
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
  {2}_OK = 0,
  {2}_ERROR_NULL_ARGUMENT = 1,   /* a tensor pointer is NULL */
  {2}_ERROR_OUT_OF_MEMORY = 2,   /* scratch memory for packed layouts could not be allocated */
  {2}_ERROR_INVALID_ARGUMENT = 3 /* e.g. a negative thread count */{5}
}};

/* What an error code means, as a constant string. */
const char* {0}_error_string(int code);
{6})",
                                name, target.to_string(), E, guard, linking, cuda_errors, threads);
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

// The part of the library's C source that both kinds share: error strings, and each function's
// argument check.
std::string common_source(const std::string& name, bool cuda) {
  std::string E = upper(name);
  std::string cuda_cases = cuda ? fmt::format(R"(
    case {0}_ERROR_NO_CUDA: return "no CUDA driver (libcuda.so.1) or no CUDA device";
    case {0}_ERROR_CUDA: return "a CUDA driver call failed";)", E) : "";
  return fmt::format(R"(#include <stdint.h>
#include <stddef.h>

#include "{0}.h"

const char* {0}_error_string(int code) {{
  switch (code) {{
    case {1}_OK: return "ok";
    case {1}_ERROR_NULL_ARGUMENT: return "a tensor pointer is NULL";
    case {1}_ERROR_OUT_OF_MEMORY: return "out of memory for the kernel's scratch buffers";
    case {1}_ERROR_INVALID_ARGUMENT: return "invalid argument";{2}
  }}
  return "unknown error code";
}}
)",
                     name, E, cuda_cases);
}

std::string null_checks(const Declaration& d) {
  std::string checks;
  for (const auto& a : d.args) checks += fmt::format("{}!{}", checks.empty() ? "" : " || ", a.name);
  return checks;
}

// CPU: the public functions call the generated kernels with the kernel ABI's argument array.
std::string cpu_api_source(const std::string& name, const std::vector<Declaration>& decls) {
  std::string E = upper(name);
  std::string out = "/* The public functions of lib" + name + ": argument checks around the generated kernels. */\n" +
                    common_source(name, false) + fmt::format(R"(#include "compiler/runtime/kernel_runtime.h"

int {0}_set_num_threads(int num_threads) {{
  if (num_threads < 0) return {1}_ERROR_INVALID_ARGUMENT;
  tunefarm_runtime_set_num_threads(num_threads);
  return {1}_OK;
}}

int {0}_num_threads(void) {{ return tunefarm_runtime_num_threads(); }}
)",
                                                                                 name, E);
  for (const auto& d : decls) {
    std::string pointers;
    for (const auto& a : d.args) pointers += fmt::format("{}(void*){}", pointers.empty() ? "" : ", ", a.name);
    out += fmt::format(R"(
int32_t {0}(void* const* args);

int {1}({2}) {{
  if ({3}) return {4}_ERROR_NULL_ARGUMENT;
  void* args[{5}] = {{{6}}};
  return {0}(args) == 0 ? {4}_OK : {4}_ERROR_OUT_OF_MEMORY;
}}
)",
                       d.entry, d.function, parameter_list(d.args, false), null_checks(d), E, d.args.size(), pointers);
  }
  return out;
}

// A C string literal of `text`, one source line per line of text.
std::string c_literal(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n\"\n    \"";
      continue;
    }
    if (c == '\t') {
      out += "\\t";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// CUDA: the driver is loaded with dlopen when a kernel is first called (a program that links the
// library needs no CUDA toolkit and starts without a GPU); the PTX modules are loaded then, once.
std::string cuda_api_source(const std::string& name, const std::vector<Declaration>& decls) {
  std::string E = upper(name);
  std::string modules, entries;
  for (const auto& d : decls) {
    modules += "    " + c_literal(d.ptx) + ",\n";
    entries += fmt::format("\"{}\", ", d.entry);
  }
  std::string out = "/* The public functions of lib" + name + ": the kernels' PTX, loaded and launched through the CUDA driver. */\n" +
                    common_source(name, true) + fmt::format(R"(
#include <dlfcn.h>
#include <pthread.h>

typedef int CUresult;
typedef int CUdevice;
typedef void* CUcontext;
typedef void* CUmodule;
typedef void* CUfunction;
typedef void* CUstream;
typedef unsigned long long CUdeviceptr;

enum {{ NUM_KERNELS = {2} }};
static const char* const kModules[NUM_KERNELS] = {{
{3}}};
static const char* const kEntries[NUM_KERNELS] = {{{4}}};

static struct {{
  CUresult (*cuInit)(unsigned);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
}} cu;
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static int load_state = -1; /* -1: not tried; otherwise {1}_OK or the error it ended with */
static CUcontext context;
static CUfunction functions[NUM_KERNELS];

static int resolve(void* lib, const char* symbol, void* slot) {{
  void* f = dlsym(lib, symbol);
  *(void**)slot = f;
  return f != NULL;
}}

static int load_locked(void) {{
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return {1}_ERROR_NO_CUDA;
  if (!resolve(lib, "cuInit", &cu.cuInit) || !resolve(lib, "cuCtxGetCurrent", &cu.cuCtxGetCurrent) ||
      !resolve(lib, "cuCtxSetCurrent", &cu.cuCtxSetCurrent) || !resolve(lib, "cuDeviceGet", &cu.cuDeviceGet) ||
      !resolve(lib, "cuDevicePrimaryCtxRetain", &cu.cuDevicePrimaryCtxRetain) ||
      !resolve(lib, "cuModuleLoadData", &cu.cuModuleLoadData) ||
      !resolve(lib, "cuModuleGetFunction", &cu.cuModuleGetFunction) || !resolve(lib, "cuLaunchKernel", &cu.cuLaunchKernel))
    return {1}_ERROR_NO_CUDA;
  if (cu.cuInit(0) != 0) return {1}_ERROR_NO_CUDA;
  if (cu.cuCtxGetCurrent(&context) != 0 || context == NULL) {{
    CUdevice device;
    if (cu.cuDeviceGet(&device, 0) != 0 || cu.cuDevicePrimaryCtxRetain(&context, device) != 0) return {1}_ERROR_NO_CUDA;
    if (cu.cuCtxSetCurrent(context) != 0) return {1}_ERROR_CUDA;
  }}
  for (int i = 0; i < NUM_KERNELS; ++i) {{
    CUmodule module;
    if (cu.cuModuleLoadData(&module, kModules[i]) != 0 || cu.cuModuleGetFunction(&functions[i], module, kEntries[i]) != 0)
      return {1}_ERROR_CUDA;
  }}
  return {1}_OK;
}}

/* Loads everything once; a thread with no current context gets the library's. */
static int prepare(void) {{
  pthread_mutex_lock(&load_mu);
  if (load_state < 0) load_state = load_locked();
  int state = load_state;
  pthread_mutex_unlock(&load_mu);
  if (state != {1}_OK) return state;
  CUcontext current = NULL;
  if (cu.cuCtxGetCurrent(&current) != 0) return {1}_ERROR_CUDA;
  if (current == NULL && cu.cuCtxSetCurrent(context) != 0) return {1}_ERROR_CUDA;
  return {1}_OK;
}}
)",
                                                                              name, E, decls.size(), modules, entries);
  for (size_t i = 0; i < decls.size(); ++i) {
    const Declaration& d = decls[i];
    std::string values, params;
    for (size_t a = 0; a < d.args.size(); ++a) {
      values += fmt::format("{}(CUdeviceptr){}", a ? ", " : "", d.args[a].name);
      params += fmt::format("{}&values[{}]", a ? ", " : "", a);
    }
    out += fmt::format(R"(
int {0}({1}) {{
  if ({2}) return {3}_ERROR_NULL_ARGUMENT;
  int rc = prepare();
  if (rc != {3}_OK) return rc;
  CUdeviceptr values[{4}] = {{{5}}};
  void* params[{4}] = {{{6}}};
  return cu.cuLaunchKernel(functions[{7}], {8}, {9}, {10}, {11}, {12}, {13}, 0, (CUstream)stream, params, NULL) == 0
             ? {3}_OK : {3}_ERROR_CUDA;
}}
)",
                       d.function, parameter_list(d.args, true), null_checks(d), E, d.args.size(), values, params, i,
                       d.grid[0], d.grid[1], d.grid[2], d.block[0], d.block[1], d.block[2]);
  }
  return out;
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
  TF_RETURN_IF_ERROR(write_file(d + "/api.c", cuda_api_source(name, decls)));
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
    LibraryObjects parts{objects, {}, cpu_api_source(name, decls), header};
    for (const auto& decl : decls) parts.private_symbols.push_back(decl.entry);
    files = link_cpu_library(name, target, parts);
  }
  if (!files.ok()) return files.status();
  files->insert(files->begin(), LibraryFile{name + ".h", header});
  return files;
}

}  // namespace tunefarm
