// The CPU runner: timed runs rotate over copies of the arguments, as a model's steps find their
// data out of the innermost caches; the run whose outputs are checked uses the tensors themselves.
#include "measure/cpu_runner.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/measure/test_kernels.h"

namespace tunefarm {
namespace {

TEST(CpuRunner, TimedRunsRotateOverCopiesOfTheArguments) {
  v1::Artifact artifact = testing::kernel_artifact("counter");
  std::string path = ::testing::TempDir() + "/cpu_runner_test_" + std::to_string(getpid()) + ".so";
  {
    std::ofstream out(path, std::ios::binary);
    out << artifact.data();
  }
  auto tensors = allocate_tensors(artifact.args());
  ASSERT_TRUE(tensors.ok()) << tensors.status().to_string();
  fill_tensors(*tensors, 1);
  auto kernel = bind_cpu_kernel(path, artifact, *tensors);
  std::remove(path.c_str());
  ASSERT_TRUE(kernel.ok()) << kernel.status().to_string();
  float* counted = reinterpret_cast<float*>((*tensors)[2].data.get());
  ASSERT_TRUE((*kernel)->run_once().ok());
  EXPECT_EQ(counted[0], 1.0f);
  // Three 16 KiB arguments rotate in 64 sets (8 MiB would take more): 128 runs give the tensors
  // themselves two of them.
  ASSERT_TRUE((*kernel)->time_runs(128).ok());
  EXPECT_EQ(counted[0], 3.0f);
}

}  // namespace
}  // namespace tunefarm
