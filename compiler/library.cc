#include "compiler/library.h"

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

std::string parameter_list(const std::vector<ops::TensorArg>& args) {
  std::string out;
  for (const auto& a : args) out += fmt::format("{}{}float* {}", out.empty() ? "" : ", ", a.is_output ? "" : "const ", a.name);
  return out;
}

std::string header_text(const std::string& name, const Target& target, const std::vector<Declaration>& decls) {
  std::string guard = upper(name) + "_H_";
  std::string E = upper(name);
  std::string out = fmt::format(R"(/* {0}.h: tuned kernels built by tunefarm (`tune-client build`) for target '{1}'.
 *
 * Link with lib{0}.so, or with lib{0}.a plus -lstdc++ -lpthread -lm. The kernel runtime (a thread
 * pool) is inside the library with its symbols kept private.
 *
 * Tensors are dense float32 arrays in the layout each function names, the last dimension
 * contiguous; outputs must not overlap inputs. Every function returns {2}_OK (0) or an error code
 * that {0}_error_string() describes. Kernels may run concurrently from several threads.
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
  {2}_ERROR_INVALID_ARGUMENT = 3 /* e.g. a negative thread count */
}};

/* What an error code means, as a constant string. */
const char* {0}_error_string(int code);

/* Threads the kernels use, the calling thread included. 0 restores the default:
 * $TUNEFARM_NUM_THREADS, else the CPUs this process may run on. */
int {0}_set_num_threads(int num_threads);
int {0}_num_threads(void);
)",
                                name, target.to_string(), E, guard);
  for (const auto& d : decls)
    out += fmt::format("\n{}\nint {}({});\n", d.comment, d.function, parameter_list(d.args));
  out += fmt::format(R"(
#ifdef __cplusplus
}}  /* extern "C" */
#endif

#endif /* {} */
)",
                     guard);
  return out;
}

std::string api_source(const std::string& name, const std::vector<Declaration>& decls) {
  std::string E = upper(name);
  std::string out = fmt::format(R"(/* The public functions of lib{0}: argument checks around the generated kernels. */
#include <stdint.h>
#include <stddef.h>

#include "{0}.h"
#include "compiler/runtime/kernel_runtime.h"

const char* {0}_error_string(int code) {{
  switch (code) {{
    case {1}_OK: return "ok";
    case {1}_ERROR_NULL_ARGUMENT: return "a tensor pointer is NULL";
    case {1}_ERROR_OUT_OF_MEMORY: return "out of memory for the kernel's scratch buffers";
    case {1}_ERROR_INVALID_ARGUMENT: return "invalid argument";
  }}
  return "unknown error code";
}}

int {0}_set_num_threads(int num_threads) {{
  if (num_threads < 0) return {1}_ERROR_INVALID_ARGUMENT;
  tunefarm_runtime_set_num_threads(num_threads);
  return {1}_OK;
}}

int {0}_num_threads(void) {{ return tunefarm_runtime_num_threads(); }}
)",
                                name, E);
  for (const auto& d : decls) {
    std::string checks, pointers;
    for (const auto& a : d.args) {
      checks += fmt::format("{}!{}", checks.empty() ? "" : " || ", a.name);
      pointers += fmt::format("{}(void*){}", pointers.empty() ? "" : ", ", a.name);
    }
    out += fmt::format(R"(
int32_t {0}(void* const* args);

int {1}({2}) {{
  if ({3}) return {4}_ERROR_NULL_ARGUMENT;
  void* args[{5}] = {{{6}}};
  return {0}(args) == 0 ? {4}_OK : {4}_ERROR_OUT_OF_MEMORY;
}}
)",
                       d.entry, d.function, parameter_list(d.args), checks, E, d.args.size(), pointers);
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

StatusOr<std::vector<LibraryFile>> build_kernel_library(const std::string& name, const Target& target,
                                                        const std::vector<LibraryKernel>& kernels) {
  TF_RETURN_IF_ERROR(check_library_name(name));
  if (kernels.empty()) return invalid_argument("a library needs at least one workload");
  if (target.kind == Target::Kind::kCUDA)
    return unimplemented(fmt::format("kernel libraries for '{}' are not built yet; CPU targets only", target.to_string()));
  TF_RETURN_IF_ERROR(codegen::check_target(target));
  TF_ASSIGN_OR_RETURN(codegen::Toolchain tools, codegen::find_toolchain(target));
  ScopedTempDir dir("", "tunefarm-library");
  TF_RETURN_IF_ERROR(dir.status());
  const std::string& d = dir.path();

  std::vector<Declaration> decls;
  std::set<std::string> functions;
  std::vector<std::string> link = {tools.ld, "-r", "-o", d + "/combined.o"};
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
    TF_ASSIGN_OR_RETURN(std::string object, codegen::compile_object(*lowered, target, decl.entry));
    std::string path = fmt::format("{}/kernel_{}.o", d, i);
    TF_RETURN_IF_ERROR(write_file(path, object));
    link.push_back(path);

    decl.comment = fmt::format("/* {}\n", k.workload.to_string());
    for (const auto& a : decl.args)
      decl.comment += fmt::format(" *   {:<7} float32{}{}{}\n", a.name, dims(a.shape), a.layout.empty() ? "  row-major" : "  " + a.layout,
                                  a.is_output ? "  (written)" : "");
    for (const auto& note : k.notes) decl.comment += fmt::format(" *   {}\n", note);
    decl.comment += " */";
    decls.push_back(std::move(decl));
  }

  std::string header = header_text(name, target, decls);
  TF_RETURN_IF_ERROR(write_file(fmt::format("{}/{}.h", d, name), header));
  TF_RETURN_IF_ERROR(write_file(d + "/api.c", api_source(name, decls)));
  std::filesystem::create_directories(d + "/compiler/runtime");
  TF_RETURN_IF_ERROR(write_file(d + "/compiler/runtime/kernel_runtime.h", runtime_sources::kHeader));
  TF_RETURN_IF_ERROR(write_file(d + "/runtime.cc", runtime_sources::kSource));
  TF_RETURN_IF_ERROR(codegen::run_tool({tools.cc, "-std=c11", "-O2", "-fPIC", "-Wall", "-Werror", "-I", d, "-c", d + "/api.c", "-o", d + "/api.o"})
                         .with_context("compiling the library's C functions"));
  // Hidden: the runtime's functions become private to the library below (libstdc++'s own
  // templates keep their default visibility and merge as usual).
  TF_RETURN_IF_ERROR(codegen::run_tool({tools.cxx, "-std=c++17", "-O2", "-fPIC", "-pthread", "-fvisibility=hidden", "-I", d, "-c",
                               d + "/runtime.cc", "-o", d + "/runtime.o"})
                         .with_context("compiling the kernel runtime"));
  link.push_back(d + "/api.o");
  link.push_back(d + "/runtime.o");
  TF_RETURN_IF_ERROR(codegen::run_tool(link).with_context("combining the library's objects"));
  std::string object = fmt::format("{}/{}.o", d, name);
  std::vector<std::string> localize = {tools.objcopy, "--localize-hidden"};
  for (const auto& decl : decls) localize.push_back("--localize-symbol=" + decl.entry);
  localize.push_back(d + "/combined.o");
  localize.push_back(object);
  TF_RETURN_IF_ERROR(codegen::run_tool(localize).with_context("making the kernels' symbols private"));
  std::string archive = fmt::format("{}/lib{}.a", d, name), shared = fmt::format("{}/lib{}.so", d, name);
  TF_RETURN_IF_ERROR(codegen::run_tool({tools.ar, "rcsD", archive, object}).with_context("archiving"));
  TF_RETURN_IF_ERROR(codegen::run_tool({tools.cxx, "-shared", "-pthread", "-Wl,-soname,lib" + name + ".so", "-o", shared, object})
                         .with_context("linking the shared library"));

  std::vector<LibraryFile> files;
  files.push_back({name + ".h", header});
  TF_ASSIGN_OR_RETURN(std::string a, read_file(archive));
  files.push_back({"lib" + name + ".a", std::move(a)});
  TF_ASSIGN_OR_RETURN(std::string so, read_file(shared));
  files.push_back({"lib" + name + ".so", std::move(so)});
  return files;
}

}  // namespace tunefarm
