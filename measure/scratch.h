// Each worker's private scratch on disk, for systems where the worker cannot have a tmpfs of its
// own in a mount namespace (measure/sandbox.h): a fresh directory inside the measurer's scratch
// directory, made before the worker starts and removed after it has ended, with whatever the
// kernel left there, so that no candidate sees what an earlier one left and none can make the
// next one fail.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace tunefarm {

// Makes the directory for worker number `n` inside `root`; its path.
StatusOr<std::string> make_worker_scratch(const std::string& root, uint64_t n);

// Removes the directory `path` and everything beneath it. Descends by descriptor (openat and
// unlinkat), never by path, holding one directory open at a time: a chain of directories deeper
// than PATH_MAX goes as easily as a flat one. Symbolic links are removed, never followed, and what
// was locked (mode 000) is unlocked first: it belongs to this user.
Status remove_tree(const std::string& path);

}  // namespace tunefarm
