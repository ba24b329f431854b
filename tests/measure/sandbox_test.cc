// The measurement sandbox seen from kernels that misbehave on purpose: each is stopped inside the
// worker, comes back as RUNTIME_ERROR (or LOAD_ERROR) with a message naming the cause, and the
// Measurer measures the next candidate.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "measure/measure.h"
#include "measure/sandbox.h"
#include "measure/scratch.h"
#include "tests/measure/test_kernels.h"

namespace tunefarm {
namespace {

using testing::kernel_artifact;
using testing::quick_options;
using testing::test_workload;

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override { start(MeasurerOptions{}); }
  void start(MeasurerOptions options) {
    auto m = Measurer::create(options);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    measurer_ = std::move(*m);
  }
  v1::MeasureResult measure(const v1::Artifact& artifact, v1::MeasureOptions options = quick_options()) {
    v1::Artifact reference = testing::reference_artifact();
    return measurer_->measure(test_workload(), options, &reference, artifact);
  }
  void expect_next_one_ok() {
    v1::MeasureResult r = measure(kernel_artifact("matmul"));
    EXPECT_EQ(r.error(), v1::OK) << r.error_msg();
  }
  static v1::MeasureOptions unchecked() {
    v1::MeasureOptions options = quick_options();
    options.set_check_correctness(false);
    return options;
  }
  std::unique_ptr<Measurer> measurer_;
};

TEST_F(SandboxTest, KernelRunsInItsOwnGroupWithoutCoreFilesExecOrSignalsToItsParent) {
  v1::MeasureResult r = measure(kernel_artifact("probe"), unchecked());
  EXPECT_EQ(r.error(), v1::OK) << r.error_msg();
}

TEST_F(SandboxTest, SocketIsRefused) {
  v1::MeasureResult r = measure(kernel_artifact("socket"));
  EXPECT_EQ(r.error(), v1::RUNTIME_ERROR);
  EXPECT_NE(r.error_msg().find("returned 11"), std::string::npos) << r.error_msg();
  EXPECT_NE(r.error_msg().find("Permission denied"), std::string::npos) << r.error_msg();
  EXPECT_NE(r.error_msg().find("network"), std::string::npos) << r.error_msg();
  expect_next_one_ok();
}

// What a GPU driver does when it initialises, and fails its cuInit where it cannot (a CUDA board's
// cuInit returned CUDA_ERROR_OPERATING_SYSTEM until the sandbox let it): name its threads through
// /proc/<getpid()>/task, with or without the PID namespace, whose /proc must be its own for
// getpid() to name the right entry.
TEST_F(SandboxTest, AKernelNamesItsThreadsThroughProcAsAGpuDriverDoes) {
  for (bool namespaces : {true, false}) {
    MeasurerOptions options;
    options.namespaces = namespaces;
    start(options);
    v1::MeasureResult r = measure(kernel_artifact("threadname"), unchecked());
    EXPECT_EQ(r.error(), v1::OK) << (namespaces ? "in namespaces: " : "without namespaces: ") << r.error_msg();
  }
}

// A GPU board's kernels may open Unix sockets (the CUDA driver's initialisation does), never the
// network; a CPU board's may open neither.
TEST_F(SandboxTest, OnAGpuBoardUnixSocketsOpenAndTheNetworkStaysShut) {
  MeasurerOptions gpu;
  gpu.gpu = true;
  start(gpu);
  v1::MeasureResult r = measure(kernel_artifact("unixsocket"), unchecked());
  EXPECT_EQ(r.error(), v1::OK) << r.error_msg();
  start(MeasurerOptions{});
  r = measure(kernel_artifact("unixsocket"), unchecked());
  EXPECT_EQ(r.error(), v1::RUNTIME_ERROR);
  EXPECT_NE(r.error_msg().find("returned 21"), std::string::npos) << r.error_msg();
}

// A directory among the GPU's devices (/dev/nvidia-caps) is bound into the private /dev. Staged as
// a file, its bind failed, the worker stayed in the PID namespace it had entered without forking
// into it, and its first thread got EINVAL: every kernel, CPU ones too, died with it.
TEST_F(SandboxTest, ADeviceDirectoryIsBoundIntoThePrivateDev) {
  if (geteuid() != 0) GTEST_SKIP() << "making a directory in /dev needs root";
  std::string dir = "/dev/nvidia-tunefarm-test-" + std::to_string(getpid());
  if (mkdir(dir.c_str(), 0755) != 0) GTEST_SKIP() << "cannot make " << dir << ": " << std::strerror(errno);
  setenv("TUNEFARM_TEST_DEV_DIR", dir.c_str(), 1);
  start(MeasurerOptions{});
  v1::MeasureResult seen = measure(kernel_artifact("devdir"), unchecked());
  v1::MeasureResult matmul = measure(kernel_artifact("matmul"));
  unsetenv("TUNEFARM_TEST_DEV_DIR");
  rmdir(dir.c_str());
  EXPECT_EQ(seen.error(), v1::OK) << seen.error_msg();
  EXPECT_EQ(matmul.error(), v1::OK) << matmul.error_msg();
}

TEST_F(SandboxTest, WriteOutsideTheScratchDirectoryIsRefused) {
  if (landlock_abi_version() == 0) GTEST_SKIP() << "this kernel has no Landlock, so writes are not confined";
  // Beside the test, outside the worker's scratch directory.
  std::filesystem::path outside =
      std::filesystem::current_path() / ("tunefarm-sandbox-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(outside);
  std::filesystem::path target = outside / "escaped";
  setenv("TUNEFARM_TEST_ESCAPE_PATH", target.c_str(), 1);
  v1::MeasureResult r = measure(kernel_artifact("escape"));
  unsetenv("TUNEFARM_TEST_ESCAPE_PATH");
  bool escaped = std::filesystem::exists(target);
  std::filesystem::remove_all(outside);
  EXPECT_FALSE(escaped);
  EXPECT_EQ(r.error(), v1::RUNTIME_ERROR);
  EXPECT_NE(r.error_msg().find("returned 12"), std::string::npos) << r.error_msg();
  // A build under /tmp runs this test from a path the worker's own /tmp hides: there the write
  // finds no directory rather than meeting Landlock's refusal.
  if (outside.string().starts_with("/tmp/"))
    EXPECT_NE(r.error_msg().find("No such file or directory"), std::string::npos) << r.error_msg();
  else
    EXPECT_NE(r.error_msg().find("scratch directory"), std::string::npos) << r.error_msg();
  expect_next_one_ok();
}

TEST_F(SandboxTest, UnboundedAllocationIsStoppedByTheMemoryLimit) {
  MeasurerOptions options;
  options.memory_limit_bytes = int64_t{512} << 20;
  start(options);
  v1::MeasureResult r = measure(kernel_artifact("hog"), quick_options(20));
  EXPECT_EQ(r.error(), v1::RUNTIME_ERROR);
  EXPECT_NE(r.error_msg().find("memory limit of 512 MiB"), std::string::npos) << r.error_msg();
  expect_next_one_ok();
}

TEST_F(SandboxTest, SpinningKernelIsStoppedByTheCpuLimitBeforeItsTimeout) {
  MeasurerOptions options;
  options.cpu_seconds_per_candidate = 1;
  start(options);
  auto begin = std::chrono::steady_clock::now();
  v1::MeasureResult r = measure(kernel_artifact("hang"), quick_options(30));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_EQ(r.error(), v1::RUNTIME_ERROR) << r.error_msg();
  EXPECT_NE(r.error_msg().find("CPU time limit"), std::string::npos) << r.error_msg();
  EXPECT_LT(took, 20);
  expect_next_one_ok();
}

TEST_F(SandboxTest, OversizedArtifactIsRefusedUnrun) {
  MeasurerOptions options;
  options.max_artifact_bytes = 1024;
  start(options);
  v1::MeasureResult r = measure(kernel_artifact("matmul"), unchecked());
  EXPECT_EQ(r.error(), v1::LOAD_ERROR);
  EXPECT_NE(r.error_msg().find("over this agent's cap of 1024 bytes"), std::string::npos) << r.error_msg();
  EXPECT_EQ(measurer_->worker_starts(), 0);
}

TEST_F(SandboxTest, ScratchDirectoryIsRemovedWithTheMeasurer) {
  expect_next_one_ok();
  std::string scratch = measurer_->scratch_dir();
  ASSERT_TRUE(std::filesystem::is_directory(scratch));
  measurer_.reset();
  EXPECT_FALSE(std::filesystem::exists(scratch));
}

// A worker's scratch directory goes however deep the chain a kernel left (deeper than PATH_MAX),
// with locked directories, and a symbolic link out of it is removed, not followed.
TEST(RemoveTree, RemovesDeepChainsLockedDirectoriesAndLinksWithoutFollowingThem) {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / ("tunefarm-remove-tree-" + std::to_string(getpid()));
  fs::path outside = root.string() + "-outside";
  fs::create_directories(root);
  fs::create_directories(outside);
  { std::ofstream(outside / "keep") << "not the scratch's\n"; }
  fs::create_directory_symlink(outside, root / "link");
  // 40 levels of 200-character names: 8,000 characters of path.
  const std::string name(200, 'd');
  int dir = open(root.c_str(), O_DIRECTORY | O_RDONLY);
  for (int i = 0; i < 40 && dir >= 0; ++i) {
    mkdirat(dir, name.c_str(), 0700);
    int next = openat(dir, name.c_str(), O_DIRECTORY | O_RDONLY);
    close(dir);
    dir = next;
  }
  ASSERT_GE(dir, 0);
  close(openat(dir, "file", O_WRONLY | O_CREAT, 0600));
  close(dir);
  fs::create_directories(root / "locked" / "inner");
  fs::permissions(root / "locked", fs::perms::none);
  Status s = remove_tree(root.string());
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_FALSE(fs::exists(root));
  EXPECT_TRUE(fs::exists(outside / "keep"));
  fs::remove_all(outside);
}

TEST(SandboxLimitFlags, RoundTripAndRejectJunk) {
  SandboxLimits limits;
  EXPECT_TRUE(parse_limit_flag(format_limit_flag("memory-bytes", 12345), limits));
  EXPECT_TRUE(parse_limit_flag(format_limit_flag("file-bytes", 77), limits));
  EXPECT_TRUE(parse_limit_flag(format_limit_flag("cpu-seconds", 3), limits));
  EXPECT_EQ(limits.memory_bytes, 12345u);
  EXPECT_EQ(limits.file_bytes, 77u);
  EXPECT_EQ(limits.cpu_seconds, 3u);
  EXPECT_FALSE(parse_limit_flag("--memory-bytes=12x", limits));
  EXPECT_FALSE(parse_limit_flag("--memory-bytes=", limits));
  EXPECT_FALSE(parse_limit_flag("--network=on", limits));
  EXPECT_TRUE(parse_limit_flag(format_limit_flag("without", kWithoutLandlock | kWithoutNobody), limits));
  EXPECT_TRUE(parse_limit_flag(format_limit_flag("gpu", 1), limits));
  EXPECT_EQ(limits.without, kWithoutLandlock | kWithoutNobody);
  EXPECT_EQ(limits.gpu, 1u);
  EXPECT_EQ(*sandbox_layer_bit("seccomp"), kWithoutSeccomp);
  EXPECT_EQ(*sandbox_layer_bit("private-dev"), kWithoutPrivateDev);
  EXPECT_NE(sandbox_layer_bit("network").status().message().find("known: landlock, seccomp, nobody, private-dev"),
            std::string::npos);
}

// A candidate must not read the agent's secrets: a token file or TLS key outside its scratch, the
// agent's command line or environment, or a token the agent took from its own environment.
TEST_F(SandboxTest, SecretsOfTheAgentAreOutOfReach) {
  if (landlock_abi_version() == 0) GTEST_SKIP() << "this kernel has no Landlock";
  std::filesystem::path secret = std::filesystem::temp_directory_path() / ("tunefarm-snoop-" + std::to_string(getpid()));
  { std::ofstream(secret) << "agent-token\n"; }
  setenv("TUNEFARM_TEST_SNOOP_PATH", secret.c_str(), 1);
  setenv("TUNEFARM_AGENT_TOKEN", "SNOOP_SECRET", 1);
  setenv("TUNEFARM_TEST_AGENT_PID", std::to_string(getpid()).c_str(), 1);
  start(MeasurerOptions{});
  v1::MeasureResult r = measure(kernel_artifact("snoop"), unchecked());
  unsetenv("TUNEFARM_TEST_AGENT_PID");
  unsetenv("TUNEFARM_AGENT_TOKEN");
  unsetenv("TUNEFARM_TEST_SNOOP_PATH");
  std::filesystem::remove(secret);
  EXPECT_EQ(r.error(), v1::OK) << "the kernel read a secret: " << r.error_msg();
  expect_next_one_ok();
}

// A candidate cannot start a process that would outlive its worker (a child in its own session,
// SIGTERM blocked); threads still work, as the parallel runtime needs them.
TEST_F(SandboxTest, ACandidateCannotStartProcesses) {
  v1::MeasureResult r = measure(kernel_artifact("forker"), unchecked());
  EXPECT_EQ(r.error(), v1::OK) << "the kernel forked: " << r.error_msg();
  expect_next_one_ok();
}

// A candidate that overwrites what it finds in its scratch directory, followed by one that crashes
// the worker: the restarted worker's correctness checks are as right as before.
TEST_F(SandboxTest, ACandidateCannotPoisonLaterCorrectnessChecks) {
  expect_next_one_ok();
  EXPECT_EQ(measure(kernel_artifact("poison"), unchecked()).error(), v1::OK);
  EXPECT_EQ(measure(kernel_artifact("crash")).error(), v1::RUNTIME_ERROR);
  for (int i = 0; i < 3; ++i) expect_next_one_ok();
  EXPECT_EQ(measure(kernel_artifact("matmul_wrong")).error(), v1::WRONG_ANSWER);
}

// Every candidate runs in a fresh directory, and nothing a candidate leaves in the worker's scratch
// (in its own directory, in $TMPDIR, above it, locked with mode 000) is there for the next one,
// whether its worker survives it or dies in it.
TEST_F(SandboxTest, ACandidateFindsNothingAnEarlierOneLeft) {
  EXPECT_EQ(measure(kernel_artifact("litter"), unchecked()).error(), v1::OK);
  EXPECT_TRUE(std::filesystem::is_empty(measurer_->scratch_dir())) << "the measurer cleans up after each worker";
  v1::MeasureResult r = measure(kernel_artifact("litter_check"), unchecked());
  EXPECT_EQ(r.error(), v1::OK) << r.error_msg();
  EXPECT_EQ(measure(kernel_artifact("litter_crash"), unchecked()).error(), v1::RUNTIME_ERROR);
  r = measure(kernel_artifact("litter_check"), unchecked());
  EXPECT_EQ(r.error(), v1::OK) << "after a worker that died: " << r.error_msg();
  expect_next_one_ok();
}

// A kernel built for another architecture (an aarch64 target sent to an x86 board) is a LOAD_ERROR
// that says so, not dlopen's "cannot open shared object file".
TEST_F(SandboxTest, AnArtifactForAnotherArchitectureSaysWhichOne) {
  v1::Artifact foreign = kernel_artifact("matmul");
  std::string bytes = foreign.data();
  ASSERT_GT(bytes.size(), 20u);
  bytes[18] = static_cast<char>(183);  // e_machine = EM_AARCH64, little-endian
  bytes[19] = 0;
  foreign.set_data(bytes);
  v1::MeasureResult r = measure(foreign);
  EXPECT_EQ(r.error(), v1::LOAD_ERROR);
  EXPECT_NE(r.error_msg().find("built for aarch64"), std::string::npos) << r.error_msg();
  expect_next_one_ok();
}

}  // namespace
}  // namespace tunefarm
