// What the daemons refuse at start, through the real programs: a port another daemon holds, a data
// directory another tunerd owns (and not one whose owner died), a config file with mistakes.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/integration/farm_harness.h"

namespace tunefarm::testing {
namespace {

std::string temp_dir(const std::string& name) {
  auto dir = std::filesystem::path(scratch_dir()) / fmt::format("daemon_test_{}", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// Waits until the log says the daemon listens (or the process ends).
bool wait_listening(Process& p) {
  for (int i = 0; i < 200; ++i) {
    if (p.log().find("listening on") != std::string::npos) return true;
    if (!p.running()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// The exit code of a process that should stop by itself within 20 s; -1 (and the process killed) when
// it goes on running or dies of a signal.
int exit_code(Process& p) {
  for (int i = 0; i < 400 && p.running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (p.running()) p.signal(SIGKILL);
  int status = p.wait();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Daemons, ASecondTrackerOnATakenPortExitsWithAddressInUse) {
  std::string dir = temp_dir("port");
  std::string listen = fmt::format("127.0.0.1:{}", free_port());
  Process first(bin_path("trackerd"), {"--listen", listen}, dir + "/first.log");
  ASSERT_TRUE(wait_listening(first)) << first.log();
  Process second(bin_path("trackerd"), {"--listen", listen}, dir + "/second.log");
  EXPECT_GT(exit_code(second), 0);
  // The taken address is the one named, not the metrics port beside it (taken by the first's too).
  EXPECT_NE(second.log().find(fmt::format("cannot listen on {}: address already in use", listen)), std::string::npos)
      << second.log();
  EXPECT_EQ(second.log().find("listening on"), std::string::npos) << second.log();
  EXPECT_TRUE(first.running());
}

TEST(Daemons, ASecondTunerdOnATakenPortExitsWithAddressInUse) {
  std::string dir = temp_dir("tunerd_port");
  std::string listen = fmt::format("127.0.0.1:{}", free_port());
  std::string tracker = fmt::format("127.0.0.1:{}", free_port());
  Process first(bin_path("tunerd"), {"--listen", listen, "--tracker", tracker, "--data-dir", dir + "/a"},
                dir + "/first.log");
  ASSERT_TRUE(wait_listening(first)) << first.log();
  Process second(bin_path("tunerd"), {"--listen", listen, "--tracker", tracker, "--data-dir", dir + "/b"},
                 dir + "/second.log");
  EXPECT_GT(exit_code(second), 0);
  // The taken address is the one named, not the metrics port beside it (taken by the first's too).
  EXPECT_NE(second.log().find(fmt::format("cannot listen on {}: address already in use", listen)), std::string::npos)
      << second.log();
  EXPECT_EQ(second.log().find("listening on"), std::string::npos) << second.log();
  EXPECT_TRUE(first.running());
}

// Metrics beside --listen (the default): a second daemon of a kind on one host, on another port,
// starts and serves its own, where one fixed default port stopped it with "address in use".
TEST(Daemons, TwoDaemonsOfAKindOnOneHostEachServeTheirOwnMetrics) {
  std::string dir = temp_dir("metrics_beside");
  // Ports with room for their metrics 200 above, taken by nothing now.
  auto pick = [] {
    for (;;) {
      int port = free_port();
      if (port + 200 <= 65535) return port;
    }
  };
  std::string tracker = fmt::format("127.0.0.1:{}", pick());
  const std::vector<std::string> metrics_beside = {"TUNEFARM_METRICS_LISTEN=auto"};
  for (std::string program : {"trackerd", "tunerd"}) {
    std::vector<std::unique_ptr<Process>> daemons;
    for (int i = 0; i < 2; ++i) {
      int port = pick();
      std::vector<std::string> args = {"--listen", fmt::format("127.0.0.1:{}", port)};
      if (program == "tunerd")
        args.insert(args.end(), {"--tracker", tracker, "--data-dir", fmt::format("{}/data{}", dir, i)});
      daemons.push_back(std::make_unique<Process>(bin_path(program), args, fmt::format("{}/{}{}.log", dir, program, i),
                                                  metrics_beside));
      Process& p = *daemons.back();
      ASSERT_TRUE(wait_listening(p)) << p.log();
      EXPECT_NE(p.log().find(fmt::format("metrics on http://127.0.0.1:{}/metrics", port + 200)), std::string::npos)
          << p.log();
    }
    for (auto& p : daemons) EXPECT_TRUE(p->running()) << p->log();
  }
}

// An address that is not host:port is named as such, not refused as one beyond loopback.
TEST(Daemons, AListenAddressThatIsNoAddressIsNamedAsSuch) {
  std::string dir = temp_dir("bogus_listen");
  Process tunerd(bin_path("tunerd"), {"--listen", "bogus", "--data-dir", dir + "/data"}, dir + "/tunerd.log");
  EXPECT_GT(exit_code(tunerd), 0);
  EXPECT_NE(tunerd.log().find("'bogus' is not an address to listen on"), std::string::npos) << tunerd.log();
  EXPECT_EQ(tunerd.log().find("TLS"), std::string::npos) << tunerd.log();
}

// A memory cap too small for the measurement worker itself is a mistake in the flags, said first
// and alone: not after a worker's "terminate called after throwing ... std::system_error".
TEST(Daemons, AMemoryLimitTooSmallForTheWorkerIsNamedFirst) {
  std::string dir = temp_dir("memory_limit");
  Process agent(bin_path("device-agent"), {"--tracker", fmt::format("127.0.0.1:{}", free_port()), "--memory-limit-mb", "1"},
                dir + "/agent.log");
  EXPECT_EQ(exit_code(agent), 2) << agent.log();
  EXPECT_EQ(agent.log().rfind("device-agent: --memory-limit-mb 1: the measurement worker alone needs", 0), 0)
      << agent.log();
  EXPECT_EQ(agent.log().find("terminate called"), std::string::npos) << agent.log();
}

// `tasks` and `build --model` ask tunerd for a model's tasks: with no tunerd there, they say what
// to check rather than only gRPC's words.
TEST(Daemons, AModelsTasksWithoutTunerdSayWhatToCheck) {
  std::string dir = temp_dir("tasks_unreachable");
  std::string model = dir + "/empty.onnx";
  std::ofstream(model).close();
  std::string server = fmt::format("127.0.0.1:{}", free_port());
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"tasks", "--model", model}, {"build", "--model", model, "-o", dir + "/out"}}) {
    std::vector<std::string> args{"--server", server};
    args.insert(args.end(), command.begin(), command.end());
    Process client(bin_path("tune-client"), args, dir + "/" + command[0] + ".log");
    EXPECT_EQ(exit_code(client), 1) << client.log();
    EXPECT_NE(client.log().find("tunerd"), std::string::npos) << client.log();
    EXPECT_NE(client.log().find("cannot reach " + server), std::string::npos) << client.log();
    EXPECT_NE(client.log().find("is it running, and is that its --listen address?"), std::string::npos)
        << client.log();
  }
}

TEST(Daemons, ADataDirectoryBelongsToOneTunerdUntilItDies) {
  std::string dir = temp_dir("lock");
  std::string tracker = fmt::format("127.0.0.1:{}", free_port());
  auto start = [&](const std::string& log) {
    return std::make_unique<Process>(
        bin_path("tunerd"),
        std::vector<std::string>{"--listen", fmt::format("127.0.0.1:{}", free_port()), "--tracker", tracker,
                                 "--data-dir", dir + "/data"},
        dir + "/" + log);
  };
  auto first = start("first.log");
  ASSERT_TRUE(wait_listening(*first)) << first->log();
  auto second = start("second.log");
  EXPECT_GT(exit_code(*second), 0);
  EXPECT_NE(second->log().find(fmt::format("in use by another process (pid {})", first->pid())), std::string::npos)
      << second->log();
  // A crash leaves no stale lock: the OS drops it with the process.
  first->signal(SIGKILL);
  first->wait();
  auto third = start("third.log");
  EXPECT_TRUE(wait_listening(*third)) << third->log();
}

TEST(Daemons, AConfigFileWithAMistakeStopsTheDaemonNamingFileLineAndKey) {
  std::string dir = temp_dir("config");
  struct Case {
    std::string text, expected;
  };
  for (const Case& c : {Case{"listen = \"127.0.0.1:1\"\ndata_dir = \"x\"\n", ":2: unknown key \"data_dir\""},
                        Case{"bogus-key = 1\n", ":1: unknown key \"bogus-key\""},
                        Case{"[tracker]\nlisten = \"127.0.0.1:1\"\n", "sections are not read"},
                        Case{"listen = \"127.0.0.1:1\n", "config.toml:1:"},
                        // A value the flag refuses: CLI11 names the flag, the file and line come with it.
                        Case{"log-level = \"info\"\nlog-format = \"loud\"\n", "config.toml:2, key \"log-format\""}}) {
    std::ofstream(dir + "/config.toml") << c.text;
    for (const char* program : {"trackerd", "tunerd", "device-agent"}) {
      Process p(bin_path(program), {"--config", dir + "/config.toml"}, dir + "/" + program + ".log");
      EXPECT_EQ(exit_code(p), 2) << program << ": " << p.log();
      EXPECT_NE(p.log().find(c.expected), std::string::npos) << program << ": " << p.log();
      EXPECT_EQ(p.log().find("listening on"), std::string::npos) << program << ": " << p.log();
    }
  }
}

TEST(Daemons, ASecondAgentWithTheSameIdIsRefusedAndTheFirstStays) {
  Farm farm;
  farm.start_agent("board-1");
  ASSERT_TRUE(farm.wait_for_agents("local-cpu", 1, std::chrono::seconds(20))) << farm.logs();
  std::string dir = temp_dir("agent_id");
  Process twin(bin_path("device-agent"), {"--tracker", farm.address(), "--key", "local-cpu", "--id", "board-1"},
               dir + "/twin.log");
  EXPECT_GT(exit_code(twin), 0) << twin.log();
  EXPECT_NE(twin.log().find("agent id 'board-1' is already connected"), std::string::npos) << twin.log();
  EXPECT_TRUE(farm.agent("board-1").running());
  auto devices = farm.stub();
  grpc::ClientContext context;
  v1::ListDevicesRequest request;
  v1::ListDevicesResponse response;
  ASSERT_TRUE(devices->ListDevices(&context, request, &response).ok());
  ASSERT_EQ(response.agents_size(), 1);
}

TEST(Daemons, AnAgentPointedAtTunerdSaysItIsNotATracker) {
  std::string dir = temp_dir("agent_at_tunerd");
  std::string listen = fmt::format("127.0.0.1:{}", free_port());
  Process tunerd(bin_path("tunerd"), {"--listen", listen, "--tracker", fmt::format("127.0.0.1:{}", free_port()),
                                      "--data-dir", dir + "/data"},
                 dir + "/tunerd.log");
  ASSERT_TRUE(wait_listening(tunerd)) << tunerd.log();
  Process agent(bin_path("device-agent"), {"--tracker", listen, "--key", "local-cpu"}, dir + "/agent.log");
  EXPECT_GT(exit_code(agent), 0) << agent.log();
  EXPECT_NE(agent.log().find(listen + " is not a tracker"), std::string::npos) << agent.log();
}

// An agent whose sandbox cannot run kernels (here: a worker launcher that fails; a memory limit
// too small for the worker is refused before, as a flag) used to join as a free agent and fail
// every candidate sent to it; it says so at start and stops.
TEST(Daemons, AnAgentThatCannotRunKernelsSaysSoAtStart) {
  Farm farm;
  std::string dir = temp_dir("misconfigured");
  Process agent(bin_path("device-agent"),
                {"--tracker", farm.address(), "--key", "local-cpu", "--worker-launcher", "/bin/false"},
                dir + "/agent.log");
  EXPECT_GT(exit_code(agent), 0) << agent.log();
  EXPECT_NE(agent.log().find("this agent cannot run kernels"), std::string::npos) << agent.log();
  EXPECT_EQ(farm.queue_status().keys_size(), 0) << "it must not have joined";
}

}  // namespace
}  // namespace tunefarm::testing
