// tune-client devices against a real tracker with one agent: the table for people, JSON for
// scripts, and one line with a non-zero exit when the tracker cannot be reached.
#include <sys/wait.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/platform.h"
#include "tests/integration/farm_harness.h"

namespace tunefarm::testing {
namespace {

struct ClientRun {
  int exit_code = -1;
  std::string output;
};

ClientRun run_client(const Farm& farm, const std::vector<std::string>& args, const std::string& name) {
  Process client(bin_path("tune-client"), args, farm.log_dir() + "/client-" + name + ".log");
  int status = client.wait();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, client.log()};
}

TEST(TuneClientDevices, PrintsTheQueueStatusAsATableAndAsJson) {
  Farm farm;
  farm.start_agent("a1");
  ASSERT_TRUE(farm.wait_for_agents("local-cpu", 1, std::chrono::seconds(10)));

  ClientRun table = run_client(farm, {"--tracker", farm.address(), "devices"}, "table");
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("local-cpu"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("a1"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("free"), std::string::npos) << table.output;
  // What the agent can run: this machine's architecture and the llvm target.
  EXPECT_NE(table.output.find("ARCH"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find(" " + host_arch() + " "), std::string::npos) << table.output;
  EXPECT_NE(table.output.find(" llvm"), std::string::npos) << table.output;

  ClientRun json = run_client(farm, {"--tracker", farm.address(), "devices", "--json"}, "json");
  EXPECT_EQ(json.exit_code, 0) << json.output;
  auto parsed = nlohmann::json::parse(json.output, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << json.output;
  ASSERT_TRUE(parsed.contains("keys")) << json.output;
  ASSERT_EQ(parsed["keys"].size(), 1u);
  EXPECT_EQ(parsed["keys"][0]["device_key"], "local-cpu");
  EXPECT_EQ(parsed["keys"][0]["agents_total"], 1);
  EXPECT_EQ(parsed["keys"][0]["agents"][0]["agent_id"], "a1");
  EXPECT_EQ(parsed["keys"][0]["agents"][0]["capabilities"]["arch"], host_arch());
  EXPECT_EQ(parsed["keys"][0]["agents"][0]["capabilities"]["targets"][0], "llvm");
}

TEST(TuneClientDevices, UnreachableTrackerIsOneLineAndNonZeroExit) {
  Farm farm;
  farm.kill_tracker(SIGKILL);
  ClientRun run = run_client(farm, {"--tracker", farm.address(), "devices"}, "down");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
  EXPECT_NE(run.output.find("tune-client: cannot get the queue status"), std::string::npos) << run.output;
  // What to check, as the commands that dial tunerd say it.
  EXPECT_NE(run.output.find("is it running, and is that its --listen address?"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace tunefarm::testing
