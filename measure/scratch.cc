#include "measure/scratch.h"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

namespace tunefarm {
namespace {

namespace fs = std::filesystem;

Status cannot(const char* what, const fs::path& path, const std::error_code& ec) {
  return internal_error(fmt::format("cannot {} '{}' in the measurement scratch directory: {}", what, path.string(),
                                    ec.message()));
}

// Empties the directory `dir` (not a symbolic link: those are removed, never followed).
Status remove_contents(const fs::path& dir) {
  std::error_code ec;
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add, ec);
  if (ec) return cannot("unlock", dir, ec);
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& path = it->path();
    fs::file_status status = fs::symlink_status(path, ec);
    if (ec) return cannot("inspect", path, ec);
    if (fs::is_directory(status)) {
      if (Status s = remove_contents(path); !s.ok()) return s;
    }
    fs::remove(path, ec);
    if (ec) return cannot("remove", path, ec);
  }
  if (ec) return cannot("list", dir, ec);
  return Status();
}

}  // namespace

StatusOr<std::string> make_candidate_scratch(const std::string& root, uint64_t n) {
  fs::path dir = fs::path(root) / fmt::format("candidate-{}", n);
  std::error_code ec;
  if (!fs::create_directory(dir, ec) || ec)
    return internal_error(fmt::format("cannot make the candidate's scratch directory '{}': {}", dir.string(),
                                      ec ? ec.message() : "it exists already"));
  return dir.string();
}

Status clear_scratch(const std::string& root) { return remove_contents(root); }

}  // namespace tunefarm
