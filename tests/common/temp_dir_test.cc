#include "common/temp_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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


// A chain of directories deeper than PATH_MAX, and a link out of the directory: the chain goes,
// what the link points to stays (removal descends by descriptor and never follows links).
TEST(TempDir, AStaleDirectoryGoesHoweverDeepAndNothingALinkPointsToGoesWithIt) {
  auto root = std::filesystem::path(::testing::TempDir()) / ("temp-dir-deep-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(root / "outside");
  std::ofstream(root / "outside" / "keep") << "precious";
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  auto dead = root / ("tunefarm-x-" + std::to_string(child) + "-abcdef");
  std::filesystem::create_directories(dead);
  std::filesystem::create_directory_symlink(root / "outside", dead / "link");
  int fd = open(dead.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  // 600 levels of "dddddddd/": 5400 characters, past PATH_MAX (4096).
  for (int i = 0; i < 600; ++i) {
    ASSERT_EQ(mkdirat(fd, "dddddddd", 0700), 0);
    int next = openat(fd, "dddddddd", O_RDONLY | O_DIRECTORY);
    close(fd);
    ASSERT_GE(next, 0);
    fd = next;
  }
  close(fd);

  EXPECT_EQ(remove_stale_temp_dirs(root.string(), "tunefarm-x"), 1);
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(root / "outside" / "keep"));
  EXPECT_TRUE(remove_tree(root.string()).ok());
  EXPECT_FALSE(std::filesystem::exists(root));
}

}  // namespace
}  // namespace tunefarm
