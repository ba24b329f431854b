// Each candidate's private scratch: a fresh directory inside the worker's scratch directory, made
// before the candidate runs and removed after it with everything the candidate left anywhere in
// the worker's scratch, so that no candidate finds files another one left. The worker clears after
// each request it answers; the measurer clears before it starts a worker, for what a worker killed
// mid-candidate could not.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace tunefarm {

// Makes the directory for request number `n` inside `root`; its path.
StatusOr<std::string> make_candidate_scratch(const std::string& root, uint64_t n);

// Removes everything inside `root` and leaves it empty. What a candidate locked (a directory of
// mode 000) is unlocked first: it belongs to this user.
Status clear_scratch(const std::string& root);

}  // namespace tunefarm
