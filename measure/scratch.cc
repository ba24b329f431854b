#include "measure/scratch.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace tunefarm {
namespace {

constexpr int kDirectoryFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

Status cannot(const char* what, const std::string& name) {
  return internal_error(
      fmt::format("cannot {} '{}' in the measurement scratch directory: {}", what, name, std::strerror(errno)));
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

}  // namespace

StatusOr<std::string> make_worker_scratch(const std::string& root, uint64_t n) {
  std::string dir = fmt::format("{}/worker-{}", root, n);
  if (mkdir(dir.c_str(), 0700) != 0)
    return internal_error(fmt::format("cannot make the worker's scratch directory '{}': {}", dir, std::strerror(errno)));
  return dir;
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

}  // namespace tunefarm
