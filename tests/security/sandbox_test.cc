// The measurement sandbox end to end: one real device agent (its sandbox capped at 512 MiB) is sent
// kernels that open a socket, write outside their scratch directory, allocate without bound and
// spin past their CPU budget. Each comes back as RUNTIME_ERROR naming the cause, the agent process
// survives every one, and it measures a good kernel afterwards.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "measure/cgroup.h"
#include "measure/sandbox.h"
#include "tests/integration/farm_harness.h"

namespace tunefarm::testing {
namespace {

class SecuritySandboxTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure()) std::cout << farm_.logs();
  }
  // One candidate of `kernel`; its result.
  v1::MeasureResult measure_one(const std::string& kernel, double timeout_s = 10) {
    MeasureOutcome out = farm_.measure(kernel_request(kernel, 1, "local-cpu", timeout_s));
    EXPECT_TRUE(out.status.ok()) << out.status.error_message();
    if (out.results.size() != 1) {
      ADD_FAILURE() << kernel << ": " << out.results.size() << " results";
      return {};
    }
    return out.results[0].result();
  }
  Farm farm_;
};

TEST_F(SecuritySandboxTest, MisbehavingKernelsFailInsideTheSandboxAndTheAgentMeasuresOn) {
  farm_.start_agent("board", "local-cpu", {"--memory-limit-mb", "512", "--cpu-seconds-per-candidate", "2"});
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(20)));

  v1::MeasureResult socket = measure_one("socket");
  EXPECT_EQ(socket.error(), v1::RUNTIME_ERROR);
  EXPECT_NE(socket.error_msg().find("network"), std::string::npos) << socket.error_msg();

  // escape.c writes next to the agent's scratch directory unless told where: the agent's $TMPDIR.
  if (landlock_abi_version() > 0) {
    v1::MeasureResult escape = measure_one("escape");
    EXPECT_EQ(escape.error(), v1::RUNTIME_ERROR);
    EXPECT_NE(escape.error_msg().find("Permission denied"), std::string::npos) << escape.error_msg();
  } else {
    std::cout << "this kernel has no Landlock: the write-confinement part is skipped\n";
  }

  v1::MeasureResult hog = measure_one("hog", 30);
  EXPECT_EQ(hog.error(), v1::RUNTIME_ERROR);
  EXPECT_NE(hog.error_msg().find("memory limit of 512 MiB"), std::string::npos) << hog.error_msg();

  v1::MeasureResult spin = measure_one("hang", 60);
  EXPECT_EQ(spin.error(), v1::RUNTIME_ERROR);
  EXPECT_NE(spin.error_msg().find("CPU time limit"), std::string::npos) << spin.error_msg();

  EXPECT_TRUE(farm_.agent("board").running());
  v1::MeasureResult good = measure_one("matmul");
  EXPECT_EQ(good.error(), v1::OK) << good.error_msg();
  EXPECT_EQ(good.agent_id(), "board");
}

// Agents serving `key` as the tracker counts them.
int agents_of(const Farm& farm, const std::string& key) {
  v1::QueueStatusResponse status = farm.queue_status();
  for (const auto& k : status.keys())
    if (k.device_key() == key) return k.agents_total();
  return 0;
}

TEST_F(SecuritySandboxTest, AnAgentWhoseWorkerCannotStartLeavesTheTrackerAndRejoinsWhenItCan) {
  // The agent, its worker and probe kernel in a folder of their own, where the worker can be taken away.
  std::string bin = farm_.log_dir() + "/agent-bin";
  std::filesystem::create_directories(bin);
  for (const char* name : {"device-agent", "tunefarm-measure-worker", "tunefarm-probe-kernel.so"})
    std::filesystem::copy_file(bin_path(name), bin + "/" + name);
  std::string worker = bin + "/tunefarm-measure-worker";
  Process agent(bin + "/device-agent", {"--tracker", farm_.address(), "--key", "local-cpu", "--id", "board"},
                farm_.log_dir() + "/agent-board.log");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(20))) << agent.log();

  std::filesystem::rename(worker, worker + ".away");
  MeasureOutcome outcome;
  std::thread client([&] { outcome = farm_.measure(kernel_request("matmul", 3)); });
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (agents_of(farm_, "local-cpu") != 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(agents_of(farm_, "local-cpu"), 0) << "the agent stayed registered while it could not measure";
  EXPECT_NE(agent.log().find("this agent cannot measure"), std::string::npos) << agent.log();
  EXPECT_TRUE(agent.running());

  // Back in place: the agent's next probe passes, it rejoins and measures the batch it left.
  std::filesystem::rename(worker + ".away", worker);
  client.join();
  EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  expect_each_candidate_once(outcome, 3);
  for (const auto& response : outcome.results)
    EXPECT_EQ(response.result().error(), v1::OK) << response.result().error_msg();
  EXPECT_NE(agent.log().find("this agent can measure again"), std::string::npos) << agent.log();
}

TEST_F(SecuritySandboxTest, AnAgentWithoutNamespacesSaysSoAtStartAndMeasures) {
  // As in a container without user namespaces: the start lines name what is missing.
  Process& agent = farm_.start_agent("bare", "local-cpu", {"--no-namespaces"});
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(20))) << agent.log();
  EXPECT_NE(agent.log().find("warning measurement sandbox: no "), std::string::npos) << agent.log();
  EXPECT_NE(agent.log().find("PID and mount namespaces (turned off by --no-namespaces)"), std::string::npos)
      << agent.log();
  EXPECT_EQ(measure_one("socket").error(), v1::RUNTIME_ERROR);
  MeasureOutcome good = farm_.measure(kernel_request("matmul", 2));
  EXPECT_TRUE(good.status.ok()) << good.status.error_message();
  expect_each_candidate_once(good, 2);
}

// The cgroup layer is named at start either way: in the line of layers where the agent makes a
// cgroup per candidate, else in a warning that says why not and what to do.
TEST_F(SecuritySandboxTest, AnAgentSaysAtStartWhetherItsCandidatesGetCgroups) {
  Process& agent = farm_.start_agent("cg", "local-cpu");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(20))) << agent.log();
  std::string log = agent.log();
  size_t layers = log.find("info measurement sandbox: ");
  ASSERT_NE(layers, std::string::npos) << log;
  std::string line = log.substr(layers, log.find('\n', layers) - layers);
  bool has = line.find(" per candidate (") != std::string::npos;
  bool says_why_not = log.find("warning measurement sandbox: no cgroup limits (") != std::string::npos &&
                      log.find("Delegate=yes") != std::string::npos;
  EXPECT_TRUE(has != says_why_not) << log;
}

// systemd stops an agent with SIGTERM: it ends cleanly, its scratch directory and its cgroups gone
// (a gRPC thread that did not block SIGTERM used to take it, and the agent died where it stood).
TEST_F(SecuritySandboxTest, AnAgentStoppedWithSigtermLeavesNoScratchOrCgroupBehind) {
  std::string scratch = farm_.log_dir() + "/agent-scratch";
  std::filesystem::create_directories(scratch);
  Process& agent = farm_.start_agent("term", "local-cpu", {"--scratch-dir", scratch});
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(20))) << agent.log();
  std::string base_name = std::string(kCgroupPrefix) + std::to_string(agent.pid());
  agent.signal(SIGTERM);
  int status = agent.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << agent.log();
  EXPECT_TRUE(std::filesystem::is_empty(scratch)) << "its scratch directory stayed";
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mounts, line)) {
    if (line.find(" - cgroup") == std::string::npos) continue;
    std::string point = line.substr(0, line.find(" - "));
    std::istringstream fields(point);
    std::string field;
    for (int i = 0; i < 5 && fields >> field; ++i) {
    }
    // Wherever under a cgroup mount the agent made its base, it is gone.
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(field, ec);
         it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      EXPECT_NE(it->path().filename().string(), base_name) << it->path();
      if (it.depth() > 3) it.disable_recursion_pending();
    }
  }
}

// A delegated directory named on purpose that cannot be used is a mistake, said at start.
TEST_F(SecuritySandboxTest, ACgroupDirectoryThatCannotBeUsedStopsTheAgent) {
  std::string dir = farm_.log_dir() + "/not-a-cgroup";
  std::filesystem::create_directories(dir);
  Process& agent = farm_.start_agent("cg-wrong", "local-cpu", {"--cgroup", dir});
  int status = agent.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << status;
  EXPECT_NE(agent.log().find("--cgroup " + dir + ": " + dir + " is not a cgroup v2 directory"), std::string::npos)
      << agent.log();
}

}  // namespace
}  // namespace tunefarm::testing
