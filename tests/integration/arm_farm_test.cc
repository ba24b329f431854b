// A farm of two architectures on one tracker: an x86-64 agent of this machine and aarch64 agents
// (make agent-arm64) under qemu-aarch64 as the boards of key "rk-a72", each measuring in its own
// emulated sandbox worker. tunerd tunes aarch64 GEMMs through them end to end. Emulated times mean
// nothing; what is checked is that results, errors, requeues and records are right. Skips, saying
// why, when the aarch64 agent was not built or qemu-user is missing.
#include <signal.h>

#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/wire/wire.h"
#include "measure/measure.h"
#include "tests/integration/farm_harness.h"
#include "tests/measure/test_kernels.h"
#include "tests/integration/tunerd_harness.h"

namespace tunefarm::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kQemu = "/usr/bin/qemu-aarch64";
constexpr const char* kCrossRoot = "/usr/aarch64-linux-gnu";
constexpr const char* kArmKey = "rk-a72";
constexpr const char* kArmTarget = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";

// $TUNEFARM_ARM64_BIN_DIR, else the build folder's -arm64 sibling that make agent-arm64 fills.
std::string arm_bin_dir() {
  if (const char* dir = std::getenv("TUNEFARM_ARM64_BIN_DIR"); dir && *dir) return dir;
  return TUNEFARM_ARM64_BIN_DIR;
}

// n candidates of the aarch64 probe kernel (measure/probe_kernel.c, built beside the aarch64
// worker), its reference attached.
v1::MeasureRequest probe_request(int n) {
  auto probe = load_probe_kernel(arm_bin_dir() + "/tunefarm-probe-kernel.so");
  EXPECT_TRUE(probe.ok()) << probe.status().to_string();
  if (!probe.ok()) return v1::MeasureRequest();
  *probe->candidate.mutable_target() = to_proto(*parse_target(kArmTarget));
  v1::MeasureRequest request;
  request.set_device_key(kArmKey);
  request.set_job_id("arm-test");
  *request.mutable_workload() = probe->workload;
  request.mutable_options()->set_number(1);
  request.mutable_options()->set_repeat(2);
  request.mutable_options()->set_timeout_s(30);
  request.mutable_options()->set_check_correctness(true);
  *request.mutable_reference() = probe->reference;
  for (int i = 0; i < n; ++i) {
    auto* c = request.add_candidates();
    c->set_id(static_cast<uint64_t>(i));
    c->mutable_config()->set_template_name("probe");
    *c->mutable_artifact() = probe->candidate;
  }
  return request;
}

class ArmFarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(arm_bin_dir() + "/device-agent"))
      GTEST_SKIP() << "no aarch64 device-agent in " << arm_bin_dir() << ": build it with 'make agent-arm64'";
    if (!std::filesystem::exists(kQemu)) GTEST_SKIP() << kQemu << " is missing (Debian's qemu-user)";
    if (!std::filesystem::exists(std::string(kCrossRoot) + "/lib"))
      GTEST_SKIP() << kCrossRoot << " is missing (Debian's crossbuild-essential-arm64)";
  }

  // An aarch64 board: the agent and its sandbox worker both run under user-mode QEMU emulating a
  // Cortex-A72, with the cross root's C library.
  Process& start_arm_agent(const std::string& id) {
    return farm_.start_emulated_agent(id, kArmKey, {kQemu}, arm_bin_dir() + "/device-agent",
                                      {"--worker-launcher", kQemu},
                                      {fmt::format("QEMU_LD_PREFIX={}", kCrossRoot), "QEMU_CPU=cortex-a72"});
  }

  std::string data_dir(const std::string& name) { return farm_.log_dir() + "/" + name; }

  Farm farm_;
};

TEST_F(ArmFarmTest, AnAarch64GemmIsTunedOnTheArmBoardsBesideAnX86Agent) {
  farm_.start_agent("x86", "local-cpu");
  start_arm_agent("pi-1");
  start_arm_agent("pi-2");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(30))) << farm_.logs();
  ASSERT_TRUE(farm_.wait_for_agents(kArmKey, 2, std::chrono::seconds(90))) << farm_.logs();

  // Each agent names its architecture and CPU; the emulated one its emulated Cortex-A72.
  auto [devices_code, devices] =
      tune_client_output(farm_, {"--tracker", farm_.address(), "devices", "--json"}, "devices");
  ASSERT_EQ(devices_code, 0) << devices;
  std::map<std::string, nlohmann::json> caps;
  nlohmann::json farm = nlohmann::json::parse(devices);
  for (const auto& key : farm["keys"]) {
    EXPECT_EQ(key["cpu_disagreement"], "") << key.dump();
    for (const auto& agent : key["agents"]) caps[agent["agent_id"].get<std::string>()] = agent["capabilities"];
  }
  ASSERT_EQ(caps.size(), 3u) << devices;
  EXPECT_EQ(caps["x86"]["arch"], "x86_64");
  for (const char* pi : {"pi-1", "pi-2"}) {
    EXPECT_EQ(caps[pi]["arch"], "aarch64");
    EXPECT_EQ(caps[pi]["cpu_name"], "cortex-a72");
    EXPECT_THAT(caps[pi]["cpu_features"].get<std::string>(), HasSubstr("+neon"));
    EXPECT_THAT(caps[pi]["cpu_features"].get<std::string>(), HasSubstr("-sve"));
  }
  // Layers of the sandbox that the emulator does not apply are said at start, not dropped unseen.
  EXPECT_THAT(farm_.agent("pi-1").log(), HasSubstr("no seccomp filter"));
  EXPECT_THAT(farm_.agent("pi-1").log(), HasSubstr("address-space cap"));

  Tunerd tunerd(farm_, data_dir("data"));
  // An x86 job at the same time, on the same tracker.
  auto x86_job = tunerd.submit("matmul:M=32,N=32,K=32", 8, 8);
  ASSERT_TRUE(x86_job.ok()) << x86_job.status().to_string();
  // The target as the issue spells it, and one without -mcpu that takes the boards' CPU.
  std::map<std::string, std::string> built_for = {
      {kArmTarget, kArmTarget},
      {"llvm -mtriple=aarch64-linux-gnu", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=" +
                                              caps["pi-1"]["cpu_features"].get<std::string>()}};
  for (const auto& [target, expected] : built_for) {
    v1::SubmitJobRequest request;
    *request.mutable_spec()->add_tasks()->mutable_workload() = to_proto(*parse_workload("matmul:M=32,N=32,K=32"));
    *request.mutable_spec()->mutable_target() = to_proto(*parse_target(target));
    request.mutable_spec()->set_device_key(kArmKey);
    request.mutable_spec()->set_trials(8);
    grpc::ClientContext context;
    v1::SubmitJobResponse response;
    ASSERT_TRUE(tunerd.stub()->SubmitJob(&context, request, &response).ok()) << tunerd.log();
    v1::Job done = tunerd.watch(response.job().id());
    ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error() << "\n" << tunerd.log() << farm_.logs();
    EXPECT_EQ(done.progress().trials_done(), 8);
    std::set<std::string> configs;
    for (const v1::Record& r : tunerd.records(done.id())) {
      EXPECT_EQ(r.result().error(), v1::OK) << r.result().error_msg();
      EXPECT_EQ(r.device_key(), kArmKey);
      EXPECT_EQ(from_proto(r.target())->to_string(), target);
      // The aarch64 agent's records carry its CPU.
      EXPECT_EQ(from_proto(r.built_for())->to_string(), expected);
      EXPECT_THAT(r.result().agent_id(), ::testing::StartsWith("pi-")) << "an x86 agent measured aarch64 code";
      if (r.remeasure_round() == 0) configs.insert(from_proto(r.config()).to_json());
    }
    EXPECT_EQ(configs.size(), 8u) << "one record per trial";
  }
  EXPECT_EQ(tunerd.watch(x86_job->id()).state(), v1::SUCCEEDED);
  for (const v1::Record& r : tunerd.records(x86_job->id())) EXPECT_EQ(r.result().agent_id(), "x86");
  tunerd.stop();
}

TEST_F(ArmFarmTest, AnArmBoardKilledMidBatchLosesNothingAndX86CodeIsALoadErrorNotACrash) {
  start_arm_agent("victim");
  start_arm_agent("survivor");
  ASSERT_TRUE(farm_.wait_for_agents(kArmKey, 2, std::chrono::seconds(90))) << farm_.logs();

  constexpr int kCandidates = 16;
  bool killed = false;
  MeasureOutcome out = farm_.measure_killing(probe_request(kCandidates), "victim", killed);
  ASSERT_TRUE(killed) << "the victim measured nothing";
  EXPECT_GT(expect_each_candidate_once(out, kCandidates), 0) << "nothing the victim held was requeued";

  // x86 candidates sent to an ARM board: an error per candidate that says why, and the board
  // serves on.
  v1::MeasureRequest x86 = probe_request(3);
  for (auto& c : *x86.mutable_candidates()) *c.mutable_artifact() = kernel_artifact("matmul");
  MeasureOutcome wrong = farm_.measure(x86);
  ASSERT_TRUE(wrong.status.ok()) << wrong.status.error_message();
  ASSERT_EQ(wrong.results.size(), 3u);
  for (const auto& r : wrong.results) {
    EXPECT_EQ(r.result().error(), v1::LOAD_ERROR) << r.result().error_msg();
    EXPECT_THAT(r.result().error_msg(), HasSubstr("built for x86_64, but this agent runs aarch64"));
  }
  MeasureOutcome after = farm_.measure(probe_request(2));
  ASSERT_EQ(after.results.size(), 2u);
  for (const auto& r : after.results) {
    EXPECT_EQ(r.result().error(), v1::OK) << r.result().error_msg();
    EXPECT_EQ(r.result().agent_id(), "survivor");
  }
}

}  // namespace
}  // namespace tunefarm::testing
