// Each worker's private scratch on disk, for systems where the worker cannot have a tmpfs of its
// own in a mount namespace (measure/sandbox.h): a fresh directory inside the measurer's scratch
// directory, made before the worker starts and removed after it has ended, with whatever the
// kernel left there, so that no candidate sees what an earlier one left and none can make the
// next one fail (remove_tree, common/temp_dir.h, removes it).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/temp_dir.h"

namespace tunefarm {

// Makes the directory for worker number `n` inside `root`; its path.
StatusOr<std::string> make_worker_scratch(const std::string& root, uint64_t n);

}  // namespace tunefarm
