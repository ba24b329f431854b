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

// How often 128 timed runs of the counter kernel (three 16 KiB arguments; it adds one to C[0])
// reached the tensors themselves, with its arguments rotated over `rotation_bytes`; `constant`:
// its first argument is a model's constant.
float runs_on_the_tensors(int64_t rotation_bytes, bool constant = false) {
  v1::Artifact artifact = testing::kernel_artifact("counter");
  artifact.mutable_args(0)->set_constant(constant);
  std::string path = ::testing::TempDir() + "/cpu_runner_test_" + std::to_string(getpid()) + ".so";
  {
    std::ofstream out(path, std::ios::binary);
    out << artifact.data();
  }
  auto tensors = allocate_tensors(artifact.args());
  EXPECT_TRUE(tensors.ok()) << tensors.status().to_string();
  if (!tensors.ok()) return -1;
  fill_tensors(*tensors, 1);
  auto kernel = bind_cpu_kernel(path, artifact, *tensors, rotation_bytes);
  std::remove(path.c_str());
  EXPECT_TRUE(kernel.ok()) << kernel.status().to_string();
  if (!kernel.ok()) return -1;
  float* counted = reinterpret_cast<float*>((*tensors)[2].data.get());
  EXPECT_TRUE((*kernel)->run_once().ok());
  EXPECT_EQ(counted[0], 1.0f);
  EXPECT_TRUE((*kernel)->time_runs(128).ok());
  return counted[0] - 1;
}

TEST(CpuRunner, TimedRunsRotateOverCopiesOfTheArguments) {
  // By default the copies span 8 MiB, more than 64 sets: 128 runs give the tensors two.
  EXPECT_EQ(runs_on_the_tensors(0), 2.0f);
}

TEST(CpuRunner, AModelsRotationBytesSetHowManyCopies) {
  // 192 KiB is four sets of 48 KiB; anything up to one set's bytes is the tensors alone.
  EXPECT_EQ(runs_on_the_tensors(192 << 10), 32.0f);
  EXPECT_EQ(runs_on_the_tensors(1000), 128.0f);
}

TEST(CpuRunner, AModelsJobRotatesOnlyItsConstants) {
  // The counter's output is an activation: written in place by every run, as the step before
  // leaves a step's input in place in a model.
  EXPECT_EQ(runs_on_the_tensors(192 << 10, true), 128.0f);
  // Timed on its own (no model's bytes), every argument rotates as before.
  EXPECT_EQ(runs_on_the_tensors(0, true), 2.0f);
}

// A model's job times each call with the candidate's code moved out of the core's caches: the
// code is the executable segment of the loaded object that holds the entry point.
TEST(CpuRunner, TheCodeToMoveIsTheSegmentThatHoldsTheFunction) {
  auto address = reinterpret_cast<const void*>(&runs_on_the_tensors);
  CodeSegment code = code_segment_of(address);
  EXPECT_LE(code.begin, reinterpret_cast<uintptr_t>(address));
  EXPECT_GT(code.end, reinterpret_cast<uintptr_t>(address));
  int on_the_stack = 0;
  CodeSegment none = code_segment_of(&on_the_stack);
  EXPECT_EQ(none.begin, none.end) << "data is no code";
}

}  // namespace
}  // namespace tunefarm
