// The CUDA templates' index arithmetic, checked without a GPU: each candidate's loop nest, with
// its block and thread loops made serial, runs on the host through the JIT and must match the
// naive reference. Covers every operator's CUDA template over random valid configs (those that
// stage tiles in shared memory need real threads and are left to ptxas and the device agent).
#include <gtest/gtest.h>

#include "compiler/build.h"
#include "compiler/codegen/codegen.h"
#include "compiler/ir/printer.h"
#include "compiler/lower/serialize_gpu.h"
#include "gpu_interpreter.h"
#include "test_util.h"

namespace tunefarm {
namespace {

// Runs a GPU kernel in the interpreter on the inputs of `bufs`, writing bufs.output.
Status interpret(const ir::LoweredFunc& f, testing_util::Buffers& bufs) {
  std::vector<float*> ptrs;
  std::vector<int64_t> sizes;
  for (auto& in : bufs.inputs) {
    ptrs.push_back(in.data());
    sizes.push_back(static_cast<int64_t>(in.size()));
  }
  ptrs.push_back(bufs.output.data());
  sizes.push_back(static_cast<int64_t>(bufs.output.size()));
  return testing_util::interpret_gpu_kernel(f, ptrs, sizes);
}

class CudaEmulation : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaEmulation, RandomValidConfigsMatchReference) {
  Workload w = *parse_workload(GetParam());
  Target gpu = *parse_target("cuda -arch=sm_90");
  for (const std::string& tname : template_names(w, gpu)) {
    auto space = *config_space(w, gpu, tname);
    int run = 0;
    for (const Config& c : testing_util::random_valid_configs(space, 3 * testing_util::configs_per_workload(), 77)) {
      if (run == testing_util::configs_per_workload()) break;
      auto f = lower_candidate(w, gpu, c);
      ASSERT_TRUE(f.ok()) << c.to_json() << ": " << f.status().to_string();
      auto serial = lower::serialize_gpu_loops(f->body);
      if (!serial.ok()) continue;  // Shared-memory staging.
      ++run;
      ir::LoweredFunc host_f = *f;
      host_f.body = *serial;
      auto obj = codegen::compile_object(host_f, Target{}, "kernel");
      ASSERT_TRUE(obj.ok()) << obj.status().to_string();
      auto jit = codegen::JitKernel::create(*obj, "kernel");
      ASSERT_TRUE(jit.ok()) << jit.status().to_string();
      auto bufs = testing_util::make_buffers(w, 31 + run);
      auto args = bufs.arg_pointers();
      ASSERT_EQ((*jit)->run(args.data()), 0);
      std::string diff = testing_util::compare(bufs.output, bufs.expected);
      ASSERT_EQ(diff, "") << w.to_string() << " " << c.to_json() << "\n" << ir::to_string(*f);
    }
    EXPECT_GE(run, testing_util::configs_per_workload() / 2) << tname << ": too few configs without shared memory";
  }
}

// Shared-memory staging needs real threads and barriers: the interpreter runs every thread of a
// block as an OS thread and checks each access against its buffer.
TEST_P(CudaEmulation, SharedMemoryStagingMatchesReferenceWithRealThreads) {
  Workload w = *parse_workload(GetParam());
  Target gpu = *parse_target("cuda -arch=sm_90");
  for (const std::string& tname : template_names(w, gpu)) {
    auto space = *config_space(w, gpu, tname);
    bool has_shared = false;
    for (const auto& k : space.knobs()) has_shared = has_shared || k.name == "shared";
    if (!has_shared) continue;
    int run = 0;
    for (const Config& c : testing_util::random_valid_configs(space, 200, 91)) {
      if (std::get<int64_t>(*c.find("shared")) == 0) continue;
      if (++run > 6) break;
      auto f = lower_candidate(w, gpu, c);
      ASSERT_TRUE(f.ok()) << f.status().to_string();
      auto bufs = testing_util::make_buffers(w, 61 + run);
      Status st = interpret(*f, bufs);
      ASSERT_TRUE(st.ok()) << c.to_json() << ": " << st.to_string() << "\n" << ir::to_string(*f);
      ASSERT_EQ(testing_util::compare(bufs.output, bufs.expected), "") << c.to_json() << "\n" << ir::to_string(*f);
    }
    EXPECT_GT(run, 0) << tname;
  }
}

// The CUDA reference kernel (one output element per thread) under GPU semantics.
TEST_P(CudaEmulation, ReferenceKernelMatchesReference) {
  Workload w = *parse_workload(GetParam());
  auto f = lower_reference(w, *parse_target("cuda -arch=sm_90"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto bufs = testing_util::make_buffers(w, 17);
  Status st = interpret(*f, bufs);
  ASSERT_TRUE(st.ok()) << st.to_string() << "\n" << ir::to_string(*f);
  EXPECT_EQ(testing_util::compare(bufs.output, bufs.expected), "") << ir::to_string(*f);
}

TEST(CudaEmulationPass, SharedMemoryKernelsAreRefused) {
  Workload w = *parse_workload("matmul:M=64,N=64,K=64");
  Target gpu = *parse_target("cuda -arch=sm_90");
  Config c = *default_config(w, gpu);
  auto f = lower_candidate(w, gpu, c);
  ASSERT_TRUE(f.ok());
  auto serial = lower::serialize_gpu_loops(f->body);
  EXPECT_FALSE(serial.ok());
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaEmulation, ::testing::ValuesIn(testing_util::small_workloads()));

}  // namespace
}  // namespace tunefarm
