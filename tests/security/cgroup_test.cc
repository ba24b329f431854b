// The per-candidate cgroups of measure/cgroup.h on their own, with processes of this test standing
// in for workers: memory that the address-space cap never sees (a memfd, a file in /dev/shm) ends
// at the cgroup's limit, and the cgroups of an agent that was killed outright are swept, with what
// still ran in them, when the next one starts. Skipped, with the reason, where this system lets
// the test make no cgroups (the hostile-kernel tests take the whole worker through them).
#define _GNU_SOURCE 1
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "measure/cgroup.h"

namespace tunefarm {
namespace {

constexpr uint64_t kLimit = 64 << 20;

std::shared_ptr<CgroupManager> manager_or_skip(std::string& why) { return CgroupManager::shared("", why); }

// Writes twice the limit into `fd` from a child in `cgroup`; how the child ended.
int fill_in_cgroup(const WorkerCgroup& cgroup, const std::string& shm_path) {
  pid_t child = fork();
  if (child == 0) {
    if (!join_cgroups(cgroup.dirs()).ok()) _exit(2);
    int fd = shm_path.empty() ? memfd_create("grow", 0) : open(shm_path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) _exit(3);
    static char chunk[1 << 20];
    std::memset(chunk, 7, sizeof chunk);
    for (uint64_t i = 0; i < 2 * kLimit / sizeof chunk; ++i)
      if (write(fd, chunk, sizeof chunk) != static_cast<ssize_t>(sizeof chunk)) _exit(4);
    _exit(81);  // It held twice the limit.
  }
  int status = 0;
  waitpid(child, &status, 0);
  return status;
}

void expect_stopped_by_the_limit(const std::string& shm_path) {
  std::string why;
  auto manager = manager_or_skip(why);
  if (!manager) GTEST_SKIP() << "no cgroups: " << why;
  if (!manager->swap_counted()) GTEST_SKIP() << "this kernel does not count swap in a cgroup";
  auto cgroup = manager->make({kLimit, 16});
  ASSERT_TRUE(cgroup.ok()) << cgroup.status().to_string();
  std::vector<std::string> dirs = cgroup->dirs();
  int status = fill_in_cgroup(*cgroup, shm_path);
  if (!shm_path.empty()) std::filesystem::remove(shm_path);
  // Killed by the cgroup's OOM killer, or refused a page (ENOMEM): either way it never held it.
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 81) << "it held twice the memory limit";
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) < 4) << "status " << status;
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
    EXPECT_TRUE(cgroup->memory_limit_hit());
  }
  EXPECT_TRUE(cgroup->remove().ok());
  for (const std::string& dir : dirs) EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
}

TEST(Cgroup, AMemfdPastTheMemoryLimitIsStopped) { expect_stopped_by_the_limit(""); }

TEST(Cgroup, SharedMemoryInDevShmPastTheMemoryLimitIsStopped) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "this system has no /dev/shm";
  expect_stopped_by_the_limit("/dev/shm/tunefarm-cgroup-test-" + std::to_string(getpid()));
}

// An agent killed with SIGKILL leaves its base directory with a worker's cgroup, and maybe a
// worker still running in it; the next manager's start kills the worker and removes both.
TEST(Cgroup, TheCgroupsOfAKilledAgentAreSwept) {
  std::vector<std::string> parents;
  {
    std::string why;
    auto manager = manager_or_skip(why);
    if (!manager) GTEST_SKIP() << "no cgroups: " << why;
    // On v2 this process lives in its base for good, and its manager is not made again.
    if (manager->version() != 1) GTEST_SKIP() << "the sweep runs once per process on cgroup v2";
    for (const std::string& base : manager->bases())
      parents.push_back(std::filesystem::path(base).parent_path().string());
  }
  // The test holds no manager from here. A pid that is gone, for the killed agent.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  std::vector<std::string> stale;
  for (const std::string& parent : parents) {
    std::string base = parent + "/" + kCgroupPrefix + std::to_string(dead);
    ASSERT_TRUE(std::filesystem::create_directory(base)) << base;
    ASSERT_TRUE(std::filesystem::create_directory(base + "/worker-0")) << base;
    stale.push_back(base + "/worker-0");
  }
  int joined[2];
  ASSERT_EQ(pipe(joined), 0);
  pid_t worker = fork();
  if (worker == 0) {
    char ok = join_cgroups(stale).ok() ? 1 : 0;
    (void)!write(joined[1], &ok, 1);
    for (;;) pause();
  }
  char ok = 0;
  ASSERT_EQ(read(joined[0], &ok, 1), 1);
  close(joined[0]);
  close(joined[1]);
  ASSERT_EQ(ok, 1) << "the stand-in worker could not join the stale cgroup";

  std::string why;
  auto manager = CgroupManager::shared("", why);
  ASSERT_TRUE(manager) << why;
  for (const std::string& dir : stale)
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir).parent_path())) << "stayed: " << dir;
  int status = 0;
  bool ended = false;
  for (int i = 0; i < 200 && !ended; ++i) {
    ended = waitpid(worker, &status, WNOHANG) == worker;
    if (!ended) usleep(10000);
  }
  if (!ended) {
    kill(worker, SIGKILL);
    waitpid(worker, nullptr, 0);
  }
  EXPECT_TRUE(ended && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "its worker was not killed";
}

// --cgroup names a directory on purpose: one that is no cgroup v2 directory is an error that says
// so, not a quiet fallback.
TEST(Cgroup, ADelegatedDirectoryThatIsNotACgroupIsRefused) {
  std::string dir = std::filesystem::temp_directory_path() / ("tunefarm-not-a-cgroup-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string why;
  auto manager = CgroupManager::shared(dir, why);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(manager, nullptr);
  EXPECT_NE(why.find(dir + " is not a cgroup v2 directory"), std::string::npos) << why;
}

}  // namespace
}  // namespace tunefarm
