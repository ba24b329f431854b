// CUDA code generation: every operator's CUDA template (default and random valid configs) and
// its reference kernel produce PTX that NVIDIA's assembler accepts for sm_90 (and sm_75), with
// launch dimensions; so does the CUDA runner's own L2-clearing kernel. Skips when ptxas is not
// installed.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "compiler/build.h"
#include "compiler/ir/printer.h"
#include "measure/cuda_runner.h"
#include "test_util.h"

namespace tunefarm {
namespace {

std::string find_ptxas() {
  for (const char* p : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"})
    if (access(p, X_OK) == 0) return p;
  return "";
}

// Runs ptxas on the PTX; returns its exit status (0: accepted).
int ptxas(const std::string& tool, const std::string& ptx, const std::string& arch) {
  std::string path = ::testing::TempDir() + "/k_" + std::to_string(getpid()) + ".ptx";
  std::ofstream(path) << ptx;
  std::string cmd = tool + " -arch=" + arch + " " + path + " -o /dev/null";
  int rc = std::system(cmd.c_str());
  std::remove(path.c_str());
  return rc;
}

TEST(CudaRunnerPtx, TheL2ClearingKernelAssembles) {
  std::string tool = find_ptxas();
  if (tool.empty()) GTEST_SKIP() << "ptxas not found (CUDA toolkit not installed): PTX not validated";
  for (const char* arch : {"sm_75", "sm_90"}) EXPECT_EQ(ptxas(tool, l2_clearing_ptx(), arch), 0) << arch;
}

class CudaTemplates : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaTemplates, PtxAssemblesForSm90) {
  std::string tool = find_ptxas();
  if (tool.empty()) GTEST_SKIP() << "ptxas not found (CUDA toolkit not installed): PTX not validated";
  Workload w = *parse_workload(GetParam());
  Target sm90 = *parse_target("cuda -arch=sm_90");
  // A few configs per workload: ptxas takes ~50 ms a kernel.
  for (const std::string& tname : template_names(w, sm90)) {
    auto space = *config_space(w, sm90, tname);
    auto configs = testing_util::random_valid_configs(space, 4, 9);
    configs.push_back(space.template_name() == default_config(w, sm90)->template_name ? *default_config(w, sm90) : configs[0]);
    for (const Config& c : configs) {
      auto k = build_kernel(w, sm90, c);
      ASSERT_TRUE(k.ok()) << c.to_json() << ": " << k.status().to_string();
      EXPECT_EQ(k->format, BuiltKernel::Format::kPtx);
      EXPECT_NE(k->binary.find(".entry " + std::string(kKernelEntry)), std::string::npos);
      int64_t threads = k->block[0] * k->block[1] * k->block[2];
      EXPECT_GE(threads, 1);
      EXPECT_LE(threads, 1024);
      EXPECT_EQ(ptxas(tool, k->binary, "sm_90"), 0) << c.to_json();
    }
  }
  auto ref = build_reference_kernel(w, sm90);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  EXPECT_EQ(ptxas(tool, ref->binary, "sm_90"), 0);
}

TEST(Ptx, OlderArchitectureAssembles) {
  std::string tool = find_ptxas();
  if (tool.empty()) GTEST_SKIP() << "ptxas not found (CUDA toolkit not installed)";
  Workload w = *parse_workload("matmul:M=64,N=64,K=64");
  Target sm75 = *parse_target("cuda -arch=sm_75");
  auto k = build_kernel(w, sm75, *default_config(w, sm75));
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  EXPECT_NE(k->binary.find(".target sm_75"), std::string::npos);
  EXPECT_EQ(ptxas(tool, k->binary, "sm_75"), 0);
}

// The GEMM CUDA template stages A and B tiles in shared memory, filled cooperatively by the
// block's threads between barriers.
TEST(Ptx, SharedMemoryStagingWithBarriers) {
  Workload w = *parse_workload("matmul:M=100,N=70,K=33");
  Target sm90 = *parse_target("cuda -arch=sm_90");
  Config c = *default_config(w, sm90);
  ASSERT_EQ(std::get<int64_t>(*c.find("shared")), 1);
  auto f = lower_candidate(w, sm90, c);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::string ir_text = ir::to_string(*f);
  EXPECT_NE(ir_text.find("allocate A.shared"), std::string::npos) << ir_text;
  EXPECT_NE(ir_text.find("allocate B.shared"), std::string::npos) << ir_text;
  EXPECT_NE(ir_text.find("gpu.barrier()"), std::string::npos) << ir_text;
  auto k = build_kernel(w, sm90, c);
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  EXPECT_NE(k->binary.find("bar.sync"), std::string::npos);
  EXPECT_NE(k->binary.find(".shared"), std::string::npos);
  std::string tool = find_ptxas();
  if (tool.empty()) GTEST_SKIP() << "ptxas not found: PTX not validated";
  EXPECT_EQ(ptxas(tool, k->binary, "sm_90"), 0);
}

TEST(Ptx, LaunchBeyondCudaLimitsIsAnError) {
  // 2^20 rows in blocks of 4 rows: 262144 blocks along y, more than CUDA allows.
  Workload w = *parse_workload("matmul:M=1048576,N=16,K=4");
  Target sm90 = *parse_target("cuda -arch=sm_90");
  auto c = parse_config_json(R"({"template":"matmul.cuda.tiled","knobs":{"tile_y":[-1,4,1],"tile_x":[-1,16,1],)"
                             R"("unroll_k":1,"shared":0}})");
  ASSERT_TRUE(c.ok());
  auto k = build_kernel(w, sm90, *c);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("exceeds CUDA's limits"), std::string::npos) << k.status().message();
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaTemplates, ::testing::ValuesIn(testing_util::small_workloads()));

}  // namespace
}  // namespace tunefarm
