// Private temporary directories named for the process that made them
// (<root>/<prefix>-<pid>-XXXXXX, mode 0700), so that directories left behind by a process that
// was killed can be told from those of live ones and removed at the next start.
#pragma once

#include <string>

#include "common/status.h"

namespace tunefarm {

// Creates a fresh directory under `root` (empty: $TMPDIR, else /tmp); its path.
StatusOr<std::string> make_owned_temp_dir(const std::string& root, const std::string& prefix);

// Removes the directory `path` and everything beneath it. Descends by descriptor (openat and
// unlinkat), never by path, holding one directory open at a time: a chain of directories deeper
// than PATH_MAX goes as easily as a flat one. Symbolic links are removed, never followed, and what
// was locked (mode 000) is unlocked first: it belongs to this user. A path that does not exist is
// no error.
Status remove_tree(const std::string& path);

// Removes the directories under `root` made by make_owned_temp_dir with `prefix` whose process is
// gone (with remove_tree: whatever a process left in one cannot stop it); returns how many.
// Directories of live processes, and anything not named that way, stay.
int remove_stale_temp_dirs(const std::string& root, const std::string& prefix);

// A directory from make_owned_temp_dir, removed with everything in it when this goes away.
class ScopedTempDir {
 public:
  ScopedTempDir(const std::string& root, const std::string& prefix);
  ~ScopedTempDir();
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  // Whether it was made, and why not.
  const Status& status() const { return status_; }
  const std::string& path() const { return path_; }

 private:
  Status status_;
  std::string path_;
};

}  // namespace tunefarm
