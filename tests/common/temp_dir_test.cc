#include "common/temp_dir.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

namespace tunefarm {
namespace {

// Directories of a process that is gone are removed at the next start; a live process's stay.
TEST(TempDir, OnlyDirectoriesOfProcessesThatAreGoneAreRemoved) {
  auto root = std::filesystem::path(::testing::TempDir()) / ("temp-dir-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(root);
  auto mine = make_owned_temp_dir(root.string(), "tunefarm-x");
  ASSERT_TRUE(mine.ok()) << mine.status().to_string();
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  auto dead = root / ("tunefarm-x-" + std::to_string(child) + "-abcdef");
  std::filesystem::create_directories(dead / "inside");
  auto unrelated = root / "tunefarm-x-notapid";
  std::filesystem::create_directories(unrelated);

  EXPECT_EQ(remove_stale_temp_dirs(root.string(), "tunefarm-x"), 1);
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(*mine));
  EXPECT_TRUE(std::filesystem::exists(unrelated));
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace tunefarm
