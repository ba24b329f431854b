#include "common/temp_dir.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace tunefarm {
namespace {

std::string root_or_tmp(const std::string& root) {
  if (!root.empty()) return root;
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

}  // namespace

StatusOr<std::string> make_owned_temp_dir(const std::string& root, const std::string& prefix) {
  std::string dir = root_or_tmp(root);
  std::string pattern = fmt::format("{}/{}-{}-XXXXXX", dir, prefix, getpid());
  if (!mkdtemp(pattern.data()))
    return unavailable(fmt::format("cannot create a scratch directory under '{}': {}", dir, std::strerror(errno)));
  return pattern;
}

int remove_stale_temp_dirs(const std::string& root, const std::string& prefix) {
  std::error_code ec;
  int removed = 0;
  std::string start = prefix + "-";
  for (const auto& entry : std::filesystem::directory_iterator(root_or_tmp(root), ec)) {
    std::string name = entry.path().filename().string();
    if (!name.starts_with(start) || !entry.is_directory(ec)) continue;
    std::string_view rest = std::string_view(name).substr(start.size());
    pid_t pid = 0;
    auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (error != std::errc() || end == rest.data() || *end != '-' || pid <= 0) continue;
    // Alive (or not ours to signal): leave it. A reused pid only delays the cleanup.
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (std::filesystem::remove_all(entry.path(), ec) > 0 && !ec) ++removed;
  }
  return removed;
}

ScopedTempDir::ScopedTempDir(const std::string& root, const std::string& prefix) {
  auto made = make_owned_temp_dir(root, prefix);
  if (made.ok()) path_ = *made;
  else status_ = made.status();
}

ScopedTempDir::~ScopedTempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

}  // namespace tunefarm
