// tunefarm's helper programs (the measurement sandbox worker, the model importer): found beside
// the program that runs them, and run as a child process that gets its input on stdin and answers
// on stdout, so that whatever the input does to it (crash, exhaust memory) stays in that process.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tunefarm {

// `name` beside the running program, in $TUNEFARM_BIN_DIR, or in build/bin beside build/tests (for
// test programs); NOT_FOUND names where it looked.
StatusOr<std::string> find_helper_program(std::string_view name);

struct HelperRun {
  int exit_code = -1;  // -1 when a signal ended it.
  int signal = 0;      // The signal that ended it, or 0.
  bool timed_out = false;
  std::string out;     // Its stdout.
  std::string err;     // Its stderr (at most 64 KiB).
};

// Runs `argv` (argv[0] the program's path) with `input` on its stdin; kills it after `timeout`.
// An error only when it could not be run at all.
StatusOr<HelperRun> run_helper(const std::vector<std::string>& argv, std::string_view input,
                               std::chrono::milliseconds timeout);

}  // namespace tunefarm
