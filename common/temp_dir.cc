#include "common/temp_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace tunefarm {
namespace {

constexpr int kDirectoryFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

Status cannot(const char* what, const std::string& name) {
  return internal_error(fmt::format("cannot {} '{}': {}", what, name, std::strerror(errno)));
}

// Removes what can be removed in `dir` at once; the name of a subdirectory that is not empty, or
// "" when `dir` is empty now.
StatusOr<std::string> remove_entries(int dir) {
  int listing_fd = openat(dir, ".", kDirectoryFlags);
  if (listing_fd < 0) return cannot("list", ".");
  DIR* listing = fdopendir(listing_fd);
  if (!listing) {
    close(listing_fd);
    return cannot("list", ".");
  }
  std::string deeper;
  Status status;
  while (dirent* entry = readdir(listing)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (unlinkat(dir, name.c_str(), 0) == 0) continue;
    if (errno != EISDIR && errno != EPERM) {
      status = cannot("remove", name);
      break;
    }
    fchmodat(dir, name.c_str(), S_IRWXU, 0);
    if (unlinkat(dir, name.c_str(), AT_REMOVEDIR) == 0) continue;
    if (errno != ENOTEMPTY && errno != EEXIST) {
      status = cannot("remove", name);
      break;
    }
    deeper = name;
    break;
  }
  closedir(listing);
  if (!status.ok()) return status;
  return deeper;
}

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

Status remove_tree(const std::string& path) {
  std::filesystem::path p(path);
  std::string parent_path = p.has_parent_path() ? p.parent_path().string() : ".";
  std::string name = p.filename().string();
  int parent = open(parent_path.c_str(), kDirectoryFlags);
  if (parent < 0) return cannot("open", parent_path);
  fchmodat(parent, name.c_str(), S_IRWXU, 0);
  int dir = openat(parent, name.c_str(), kDirectoryFlags);
  if (dir < 0) {
    Status s = errno == ENOENT ? Status() : cannot("open", name);
    close(parent);
    return s;
  }
  // Down into the first directory that is not empty, up again when one is: one descriptor open.
  int depth = 0;
  Status status;
  for (;;) {
    auto deeper = remove_entries(dir);
    if (!deeper.ok()) {
      status = deeper.status();
      break;
    }
    int next = -1;
    if (!deeper->empty()) {
      next = openat(dir, deeper->c_str(), kDirectoryFlags);
      if (next < 0) {
        status = cannot("open", *deeper);
        break;
      }
      ++depth;
    } else if (depth > 0) {
      next = openat(dir, "..", kDirectoryFlags);
      if (next < 0) {
        status = cannot("open the parent of", ".");
        break;
      }
      --depth;
    } else {
      break;
    }
    close(dir);
    dir = next;
  }
  close(dir);
  if (status.ok() && unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0) status = cannot("remove", name);
  close(parent);
  return status;
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
    if (remove_tree(entry.path().string()).ok()) ++removed;
  }
  return removed;
}

ScopedTempDir::ScopedTempDir(const std::string& root, const std::string& prefix) {
  auto made = make_owned_temp_dir(root, prefix);
  if (made.ok()) path_ = *made;
  else status_ = made.status();
}

ScopedTempDir::~ScopedTempDir() {
  // Nothing to do about a failure here but leave it to remove_stale_temp_dirs.
  if (!path_.empty()) (void)remove_tree(path_);
}

}  // namespace tunefarm
