#include "common/platform.h"

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

Target target(const char* text) { return *parse_target(text); }

const AgentPlatform kX86{.arch = "x86_64"};
const AgentPlatform kX86Gpu{.arch = "x86_64", .cuda = true};
const AgentPlatform kArm{.arch = "aarch64"};
const AgentPlatform kTooOld{.arch = ""};

Status check(const char* text, const std::vector<AgentPlatform>& agents, const char* host = "x86_64") {
  return check_agents_can_run("lab", target(text), agents, host);
}

TEST(Platform, ArchNamesFollowLlvm) {
  EXPECT_EQ(llvm_arch_name("arm64"), "aarch64");
  EXPECT_EQ(llvm_arch_name("amd64"), "x86_64");
  EXPECT_EQ(llvm_arch_name("x86_64"), "x86_64");
  EXPECT_EQ(llvm_arch_name("aarch64"), "aarch64");
  std::string host = host_arch();
  EXPECT_FALSE(host.empty());
  EXPECT_NE(host, "arm64");
}

TEST(Platform, TargetArchIsTheTriplesFirstPartOrTheHosts) {
  EXPECT_EQ(target_arch(target("llvm"), "x86_64"), "x86_64");
  EXPECT_EQ(target_arch(target("llvm -mcpu=skylake"), "aarch64"), "aarch64");
  EXPECT_EQ(target_arch(target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"), "x86_64"), "aarch64");
  EXPECT_EQ(target_arch(target("llvm -mtriple=arm64-apple-macosx"), "x86_64"), "aarch64");
  EXPECT_EQ(target_arch(target("llvm -mtriple=x86_64-pc-linux-gnu"), "aarch64"), "x86_64");
  EXPECT_EQ(target_arch(target("cuda -arch=sm_90"), "x86_64"), "");
}

TEST(Platform, AnAgentOfTheTargetsArchOrWithCudaRunsIt) {
  EXPECT_TRUE(check("llvm", {kX86}).ok());
  EXPECT_TRUE(check("llvm -mtriple=x86_64-linux-gnu", {kX86}).ok());
  EXPECT_TRUE(check("llvm -mtriple=aarch64-linux-gnu", {kX86, kArm}).ok());
  EXPECT_TRUE(check("llvm", {kArm}, "aarch64").ok());
  EXPECT_TRUE(check("cuda -arch=sm_90", {kX86, kX86Gpu}).ok());
}

TEST(Platform, NoAgentsOrAnAgentTooOldToSayIsAccepted) {
  EXPECT_TRUE(check("cuda -arch=sm_90", {}).ok());
  EXPECT_TRUE(check("llvm -mtriple=aarch64-linux-gnu", {}).ok());
  EXPECT_TRUE(check("cuda -arch=sm_90", {kX86, kTooOld}).ok());
  EXPECT_TRUE(check("llvm -mtriple=aarch64-linux-gnu", {kTooOld}).ok());
}

TEST(Platform, CudaOnCpuOnlyAgentsIsRefusedNamingKeyAgentsAndTarget) {
  Status s = check("cuda -arch=sm_90", {kX86, kX86});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("device key 'lab'"));
  EXPECT_THAT(s.message(), HasSubstr("2 agents, all x86_64 without CUDA"));
  EXPECT_THAT(s.message(), HasSubstr("'cuda -arch=sm_90'"));
  EXPECT_THAT(s.message(), HasSubstr("CUDA GPU"));
}

TEST(Platform, AnotherArchIsRefusedSayingWhichArchItNeeds) {
  Status s = check("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", {kX86Gpu});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("1 agent, x86_64 with CUDA"));
  EXPECT_THAT(s.message(), HasSubstr("'llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72'"));
  EXPECT_THAT(s.message(), HasSubstr("an aarch64 CPU"));

  // A host target means tunerd's host: an x86_64 tunerd cannot tune for aarch64-only agents.
  s = check("llvm", {kArm, kArm, AgentPlatform{.arch = "aarch64", .cuda = true}}, "x86_64");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("3 agents: 2 aarch64 without CUDA, 1 aarch64 with CUDA"));
  EXPECT_THAT(s.message(), HasSubstr("an x86_64 CPU"));
}

AgentPlatform board(const char* id, const char* cpu, const char* features = "") {
  return {.arch = "x86_64", .agent_id = id, .cpu_name = cpu, .cpu_features = features};
}

TEST(Platform, AgentsThatAgreeOnTheirCpuOrDoNotSayPass) {
  using Agents = std::vector<AgentPlatform>;
  EXPECT_TRUE(check_agents_agree_on_cpu("lab", Agents{}).ok());
  EXPECT_TRUE(check_agents_agree_on_cpu("lab", Agents{board("a", "haswell"), board("b", "haswell"), kTooOld}).ok());
  EXPECT_TRUE(check_agents_agree_on_cpu("lab", Agents{kX86, kX86}).ok());
}

TEST(Platform, AgentsThatDifferInCpuOrFeaturesAreNamedByGroup) {
  Status s = check_agents_agree_on_cpu(
      "lab", std::vector<AgentPlatform>{board("a", "znver4", "+avx512f"), board("b", "znver4", "-avx512f"),
                                        board("c", "znver4", "+avx512f")});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("the agents of device key 'lab' differ in CPU: a, c (znver4 +avx512f); "
                                     "b (znver4 -avx512f)"));
  EXPECT_THAT(s.message(), HasSubstr("--key"));
}

TEST(Platform, AnLlvmTargetWithoutACpuTakesTheAgentsCpu) {
  std::vector<AgentPlatform> haswell = {kTooOld, board("a", "haswell", "+avx2,-avx512f")};
  EXPECT_EQ(resolve_target(target("llvm"), haswell).to_string(), "llvm -mcpu=haswell -mattr=+avx2,-avx512f");
  // Features the job names win; a CPU it names is left alone, and so is a key that says nothing.
  EXPECT_EQ(resolve_target(target("llvm -mattr=-fma"), haswell).to_string(), "llvm -mcpu=haswell -mattr=-fma");
  EXPECT_EQ(resolve_target(target("llvm -mcpu=skylake"), haswell).to_string(), "llvm -mcpu=skylake");
  EXPECT_EQ(resolve_target(target("llvm"), std::vector<AgentPlatform>{kX86, kTooOld}).to_string(), "llvm");
  EXPECT_EQ(resolve_target(target("cuda -arch=sm_90"), haswell).to_string(), "cuda -arch=sm_90");
  std::vector<AgentPlatform> a72 = {{.arch = "aarch64", .agent_id = "pi", .cpu_name = "cortex-a72"}};
  EXPECT_EQ(resolve_target(target("llvm -mtriple=aarch64-linux-gnu"), a72).to_string(),
            "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72");
}

}  // namespace
}  // namespace tunefarm
