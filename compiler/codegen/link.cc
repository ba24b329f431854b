// Object -> shared object with the system linker, run as a child process in a private
// temporary directory.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/temp_dir.h"
#include "compiler/codegen/codegen.h"

extern char** environ;

namespace tunefarm::codegen {
namespace {

bool on_path(const std::string& tool) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':'))
    if (!dir.empty() && access((dir + "/" + tool).c_str(), X_OK) == 0) return true;
  return false;
}

// The linker for a target: the host's `ld`, a cross `ld` named after the triple, or LLVM's lld.
StatusOr<std::string> find_linker(const Target& target) {
  std::vector<std::string> candidates;
  if (target.mtriple.empty()) {
    candidates = {"ld", "ld.lld-16", "ld.lld"};
  } else {
    std::string arch = target.mtriple.substr(0, target.mtriple.find('-'));
    std::string gnu = arch + "-linux-gnu-ld";
    candidates = {gnu, "ld.lld-16", "ld.lld"};
  }
  for (const auto& c : candidates)
    if (on_path(c)) return c;
  return unavailable(fmt::format("no linker for target '{}' (tried {})", target.to_string(), fmt::join(candidates, ", ")));
}

class TempDir {
 public:
  TempDir() {
    auto made = make_owned_temp_dir("", "tunefarm-link");
    if (made.ok()) path_ = *made;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

StatusOr<std::string> link_shared_object(const std::string& object, const Target& target) {
  TF_ASSIGN_OR_RETURN(std::string linker, find_linker(target));
  TempDir dir;
  if (dir.path().empty()) return internal_error("cannot create a temporary directory for linking");
  std::string obj = dir.path() + "/kernel.o", so = dir.path() + "/kernel.so";
  {
    std::ofstream out(obj, std::ios::binary);
    out.write(object.data(), static_cast<std::streamsize>(object.size()));
    if (!out) return internal_error("cannot write " + obj);
  }
  std::vector<std::string> argv_s = {linker, "-shared", "--hash-style=gnu", "-o", so, obj};
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, linker.c_str(), nullptr, nullptr, argv.data(), environ) != 0)
    return unavailable("cannot run the linker " + linker);
  int wstatus = 0;
  if (waitpid(pid, &wstatus, 0) < 0 || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
    return internal_error(fmt::format("{} -shared failed (status {})", linker, wstatus));
  std::ifstream in(so, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (!in) return internal_error("cannot read the linked shared object");
  return bytes.str();
}

}  // namespace tunefarm::codegen
