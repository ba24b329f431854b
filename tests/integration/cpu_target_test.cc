// Targets resolved per board, end to end: tunerd compiles an llvm job for the CPU its key's agents
// name, never for its own host. Boards here are agents in this process whose measurer disassembles
// every artifact it is sent (the candidates and the reference) and answers with a made-up time, so
// what a board of that CPU would have had to run is checked whatever this machine's CPU is.
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cpu_detect.h"
#include "common/wire/wire.h"
#include "device_agent/agent.h"
#include "tests/disassembly.h"
#include "tests/integration/farm_harness.h"
#include "tests/integration/tunerd_harness.h"

namespace tunefarm::testing {
namespace {

using ::testing::HasSubstr;

// What a board was sent: how many artifacts, how many used AVX-512 (zmm) or AVX (ymm) registers.
struct Sent {
  std::mutex mu;
  int artifacts = 0;
  int with_zmm = 0;
  int with_ymm = 0;
};

// An agent of this process that declares `cpu` and disassembles what it is sent.
class InspectingBoard {
 public:
  InspectingBoard(const Farm& farm, const std::string& id, const std::string& key, const std::string& cpu) {
    AgentOptions options;
    options.tracker = farm.address();
    options.device_key = key;
    options.agent_id = id;
    v1::Capabilities capabilities = local_capabilities();
    capabilities.set_cpu_name(cpu);
    capabilities.clear_cpu_features();
    agent_ = std::make_unique<DeviceAgent>(options, capabilities,
                                           [this](const v1::LeasedBatch& batch, const v1::Candidate& candidate) {
                                             inspect(batch.reference().data());
                                             inspect(candidate.artifact().data());
                                             v1::MeasureResult result;
                                             result.add_costs(1e-3 / (1 + candidate.id() % 5));
                                             return result;
                                           });
    // What the board was sent is what the test reads, not how its session ended.
    thread_ = std::thread([this] { (void)agent_->run(); });
  }
  ~InspectingBoard() {
    agent_->stop();
    thread_.join();
  }
  Sent& sent() { return sent_; }

 private:
  void inspect(const std::string& object) {
    if (object.empty()) return;
    std::string code = disassemble(object);
    std::lock_guard<std::mutex> lock(sent_.mu);
    ++sent_.artifacts;
    sent_.with_zmm += code.find("zmm") != std::string::npos;
    sent_.with_ymm += code.find("ymm") != std::string::npos;
  }

  Sent sent_;
  std::unique_ptr<DeviceAgent> agent_;
  std::thread thread_;
};

class CpuTargetTest : public ::testing::Test {
 protected:
  std::string data_dir(const std::string& name) { return farm_.log_dir() + "/" + name; }
  Farm farm_;
};

TEST_F(CpuTargetTest, AHaswellBoardIsSentNoAvx512InstructionsWhateverTunerdsHostHas) {
  InspectingBoard haswell(farm_, "old-box", "haswell-box", "haswell");
  // The same job for a board with AVX-512: the check can fail.
  InspectingBoard avx512(farm_, "new-box", "avx512-box", "x86-64-v4");
  ASSERT_TRUE(farm_.wait_for_agents("haswell-box", 1, std::chrono::seconds(20)));
  ASSERT_TRUE(farm_.wait_for_agents("avx512-box", 1, std::chrono::seconds(20)));
  Tunerd tunerd(farm_, data_dir("data"));

  for (const char* key : {"haswell-box", "avx512-box"}) {
    auto [code, out] = tune_client_output(farm_,
                                          {"--server", tunerd.address(), "submit", "--workload", "matmul:M=64,N=64,K=64",
                                           "--target", "llvm", "--device", key, "--trials", "8", "--watch"},
                                          key);
    ASSERT_EQ(code, 0) << out << "\n" << tunerd.log();
  }
  {
    std::lock_guard<std::mutex> lock(haswell.sent().mu);
    EXPECT_GE(haswell.sent().artifacts, 16) << "8 candidates and their references";
    EXPECT_EQ(haswell.sent().with_zmm, 0) << "AVX-512 code sent to a haswell board";
    EXPECT_GT(haswell.sent().with_ymm, 0) << "no AVX2 code either: the kernels were not vectorized for haswell";
  }
  {
    std::lock_guard<std::mutex> lock(avx512.sent().mu);
    EXPECT_GT(avx512.sent().with_zmm, 0) << "an x86-64-v4 board got no AVX-512 code: the check above proves nothing";
  }

  // The records keep the target the job named, and say which CPU they were built for.
  auto [code, out] = tune_client_output(farm_, {"--server", tunerd.address(), "records", "--json"}, "records");
  ASSERT_EQ(code, 0) << out;
  auto records = nlohmann::json::parse(out)["records"];
  ASSERT_GE(records.size(), 16u);
  for (const auto& r : records) {
    EXPECT_EQ(r["target"]["mcpu"], "");
    EXPECT_EQ(r["built_for"]["mcpu"], r["device_key"] == "haswell-box" ? "haswell" : "x86-64-v4") << r.dump();
  }
}

TEST_F(CpuTargetTest, ALibraryOfAHaswellKeysRecordsIsBuiltForHaswell) {
  InspectingBoard haswell(farm_, "old-box", "haswell-box", "haswell");
  ASSERT_TRUE(farm_.wait_for_agents("haswell-box", 1, std::chrono::seconds(20)));
  Tunerd tunerd(farm_, data_dir("data"));
  const std::string workload = "matmul:M=64,N=64,K=64";
  auto [code, out] = tune_client_output(farm_,
                                        {"--server", tunerd.address(), "submit", "--workload", workload, "--target",
                                         "llvm", "--device", "haswell-box", "--trials", "4", "--watch"},
                                        "submit");
  ASSERT_EQ(code, 0) << out << "\n" << tunerd.log();
  std::string dir = data_dir("kernels");
  auto [built, why] = tune_client_output(farm_,
                                         {"--server", tunerd.address(), "build", "--workload", workload, "--target",
                                          "llvm", "--device", "haswell-box", "--require-tuned", "-o", dir},
                                         "build");
  ASSERT_EQ(built, 0) << why << "\n" << tunerd.log();
  std::ifstream manifest_file(dir + "/manifest.json");
  auto manifest = nlohmann::json::parse(manifest_file);
  EXPECT_EQ(manifest["target"], "llvm -mcpu=haswell");
  std::ifstream so(dir + "/libtunefarm_kernels.so", std::ios::binary);
  std::string code_text = disassemble(std::string(std::istreambuf_iterator<char>(so), {}));
  ASSERT_NE(code_text.find("ymm"), std::string::npos) << "not vectorized: the check below says nothing";
  EXPECT_EQ(code_text.find("zmm"), std::string::npos) << "AVX-512 code in a library for haswell boards";
}

TEST_F(CpuTargetTest, AKeyWhoseAgentsDifferInCpuIsShownAndItsJobsAreRefused) {
  farm_.start_agent("old", "mixed", {"--cpu", "haswell"});
  farm_.start_agent("new", "mixed", {"--cpu", "znver4", "--cpu-features", "+avx512f"});
  farm_.start_agent("plain", "local-cpu");
  ASSERT_TRUE(farm_.wait_for_agents("mixed", 2, std::chrono::seconds(30))) << farm_.logs();
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(30))) << farm_.logs();
  const std::string differ = "the agents of device key 'mixed' differ in CPU: new (znver4 +avx512f); old (haswell)";

  auto [code, table] = tune_client_output(farm_, {"--tracker", farm_.address(), "devices"}, "devices");
  ASSERT_EQ(code, 0) << table;
  EXPECT_THAT(table, HasSubstr("warning: " + differ)) << table;
  EXPECT_THAT(table, HasSubstr(" haswell ")) << table;

  auto [json_code, json] = tune_client_output(farm_, {"--tracker", farm_.address(), "devices", "--json"}, "json");
  ASSERT_EQ(json_code, 0) << json;
  auto keys = nlohmann::json::parse(json)["keys"];
  ASSERT_EQ(keys.size(), 2u);
  for (const auto& key : keys) {
    if (key["device_key"] == "mixed") {
      EXPECT_THAT(key["cpu_disagreement"].get<std::string>(), HasSubstr(differ));
      EXPECT_EQ(key["agents"][1]["capabilities"]["cpu_name"], "haswell");
    } else {
      // An agent that is not told its CPU detects it.
      EXPECT_EQ(key["cpu_disagreement"], "");
      EXPECT_EQ(key["agents"][0]["capabilities"]["cpu_name"], host_cpu().name);
      EXPECT_EQ(key["agents"][0]["capabilities"]["cpu_features"], host_cpu().features);
    }
  }

  Tunerd tunerd(farm_, data_dir("data"));
  auto [refused, why] = tune_client_output(farm_,
                                           {"--server", tunerd.address(), "submit", "--workload",
                                            "matmul:M=16,N=16,K=16", "--target", "llvm", "--device", "mixed",
                                            "--trials", "4"},
                                           "refused");
  EXPECT_NE(refused, 0) << why;
  EXPECT_THAT(why, HasSubstr(differ)) << why;
  auto [listed, jobs] = tune_client_output(farm_, {"--server", tunerd.address(), "jobs", "--json"}, "jobs");
  EXPECT_EQ(listed, 0) << jobs;
  EXPECT_THAT(jobs, ::testing::Not(HasSubstr("mixed"))) << "a refused job was stored";
}

TEST_F(CpuTargetTest, AnAgentToldAMalformedCpuStopsNamingTheFlag) {
  Process& agent = farm_.start_agent("typo", "local-cpu", {"--cpu", "has well"});
  int status = agent.wait();
  ASSERT_TRUE(WIFEXITED(status)) << agent.log();
  EXPECT_EQ(WEXITSTATUS(status), 2) << agent.log();
  EXPECT_THAT(agent.log(), HasSubstr("--cpu, --cpu-features: CPU name 'has well'"));
}

}  // namespace
}  // namespace tunefarm::testing
