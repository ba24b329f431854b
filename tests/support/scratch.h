// A test process's own scratch directory: the files and directories its tests write (built
// models, daemons' data and logs, token files) go beneath it, and it goes when the process exits.
// Tests ran as one process per test (ctest), each leaving its directories behind: hundreds per
// run, half a gigabyte of built models among them.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "common/temp_dir.h"

namespace tunefarm::testing {

// Made at the first call under the test temp dir (<tmp>/tunefarm-test-<pid>-XXXXXX). It stays
// when a test of the process failed, for what its daemons logged. Only the process that made it
// removes it: a forked child that exits normally leaves its parent's directory alone.
inline const std::string& scratch_dir() {
  struct Scratch {
    pid_t owner = getpid();
    std::string path;
    Scratch() {
      auto made = make_owned_temp_dir(::testing::TempDir(), "tunefarm-test");
      if (!made.ok()) {
        std::fprintf(stderr, "cannot make the tests' scratch directory: %s\n", made.status().to_string().c_str());
        std::abort();
      }
      path = *made;
    }
    ~Scratch() {
      if (getpid() != owner) return;
      if (::testing::UnitTest::GetInstance()->failed_test_count() > 0)
        std::fprintf(stderr, "the failed test's files are kept in %s\n", path.c_str());
      else
        (void)remove_tree(path);
    }
  };
  static const Scratch scratch;
  return scratch.path;
}

}  // namespace tunefarm::testing
