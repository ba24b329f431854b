// The system tools that turn generated objects into what programs link: the C/C++ compilers, `ld`,
// `ar` and `objcopy` for kernel libraries. (Candidates' shared objects are linked in-process: link.cc.)
// Each runs as a child process (common/helper_program.h) in a private temporary directory.
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/helper_program.h"
#include "compiler/codegen/codegen.h"

namespace tunefarm::codegen {
namespace {

// A build step taking longer than this is stuck (a compiler waiting on something it should not).
constexpr std::chrono::seconds kToolTimeout{300};

std::string on_path(const std::string& tool) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path && *path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::string full = dir + "/" + tool;
    if (!dir.empty() && access(full.c_str(), X_OK) == 0) return full;
  }
  return {};
}

// The first of `candidates` on PATH; `what` names the tool in the error.
StatusOr<std::string> find_tool(const std::vector<std::string>& candidates, const Target& target, std::string_view what) {
  for (const auto& c : candidates)
    if (std::string full = on_path(c); !full.empty()) return full;
  return unavailable(fmt::format("no {} for target '{}' (tried {}){}", what, target.to_string(), fmt::join(candidates, ", "),
                                 target.mtriple.empty() ? "" : "; install Debian's crossbuild-essential for its architecture"));
}

// "aarch64-linux-gnu-" for a cross target, "" for the host.
std::string cross_prefix(const Target& target) {
  if (target.mtriple.empty()) return "";
  return target.mtriple.substr(0, target.mtriple.find('-')) + "-linux-gnu-";
}

}  // namespace

Status run_tool(const std::vector<std::string>& argv) {
  auto run = run_helper(argv, "", kToolTimeout);
  if (!run.ok()) return run.status();
  if (run->exit_code == 0) return Status();
  std::string err = run->err;
  while (!err.empty() && err.back() == '\n') err.pop_back();
  if (size_t cut = err.rfind('\n', err.size() > 2000 ? err.size() - 2000 : 0); err.size() > 2000 && cut != std::string::npos)
    err = err.substr(cut + 1);
  std::string name = argv[0].substr(argv[0].rfind('/') + 1);
  if (run->timed_out) return deadline_exceeded(fmt::format("{} did not finish within {} s", name, kToolTimeout.count()));
  return internal_error(fmt::format("{} failed ({}){}{}", name,
                                    run->signal ? fmt::format("signal {}", run->signal) : fmt::format("exit {}", run->exit_code),
                                    err.empty() ? "" : ": ", err));
}

StatusOr<Toolchain> find_toolchain(const Target& target) {
  std::string prefix = cross_prefix(target);
  Toolchain t;
  TF_ASSIGN_OR_RETURN(t.cc, find_tool({prefix + "gcc", prefix.empty() ? "cc" : prefix + "cc"}, target, "C compiler"));
  TF_ASSIGN_OR_RETURN(t.cxx, find_tool({prefix + "g++", prefix.empty() ? "c++" : prefix + "c++"}, target, "C++ compiler"));
  TF_ASSIGN_OR_RETURN(t.ld, find_tool({prefix + "ld", "ld.lld-16", "ld.lld"}, target, "linker"));
  TF_ASSIGN_OR_RETURN(t.ar, find_tool({prefix + "ar", "llvm-ar-16"}, target, "archiver"));
  TF_ASSIGN_OR_RETURN(t.objcopy, find_tool({prefix + "objcopy", "llvm-objcopy-16"}, target, "objcopy"));
  return t;
}

}  // namespace tunefarm::codegen
