// Targets are checked against LLVM's tables before anything builds for them: a string that would
// make LLVM abort (an unknown CPU, a CPU without 64-bit mode, a foreign architecture with odd
// features) is an error that names the bad part, and every build path refuses it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "compiler/build.h"
#include "compiler/codegen/codegen.h"

namespace tunefarm {
namespace {

Status check(const std::string& text) {
  auto t = parse_target(text);
  if (!t.ok()) return t.status();
  return codegen::check_target(*t);
}

TEST(TargetCheck, AcceptsTheTargetsTheFarmBuildsFor) {
  for (const char* text : {"llvm", "llvm -mcpu=x86-64-v3", "llvm -mcpu=znver4", "llvm -mcpu=skylake-avx512 -mattr=-avx512f",
                           "llvm -mtriple=x86_64-linux-gnu", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72",
                           "llvm -mtriple=aarch64-linux-gnu -mattr=+neon", "cuda -arch=sm_90"})
    EXPECT_TRUE(check(text).ok()) << text << ": " << check(text).message();
}

TEST(TargetCheck, RefusesWhatWouldMakeLlvmAbortNamingThePart) {
  struct Case {
    const char* text;
    const char* names;
  };
  for (const Case& c : {Case{"llvm -mcpu=nonexistent", "CPU 'nonexistent' is not known"},
                        Case{"llvm -mcpu=i386", "lacks features the kernels need"},
                        Case{"llvm -mattr=-64bit", "lacks features the kernels need"},
                        Case{"llvm -mattr=+nosuchfeature", "feature 'nosuchfeature' is not known"},
                        Case{"llvm -mattr=avx2", "must be +name or -name"},
                        Case{"llvm -mtriple=riscv64-linux-gnu -mattr=+v", "triple 'riscv64-linux-gnu' is not supported"},
                        Case{"llvm -mtriple=x86_64-windows-msvc", "is not supported"},
                        Case{"llvm -mtriple=aarch64-linux-gnu -mcpu=skylake", "CPU 'skylake' is not known"}}) {
    Status s = check(c.text);
    EXPECT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(s.message().find(c.names), std::string::npos) << c.text << ": " << s.message();
  }
}

TEST(TargetCheck, ABuildForABadTargetIsAnErrorNotAnAbort) {
  Workload w = *parse_workload("matmul:M=16,N=16,K=16");
  // A config that builds for the host, so that the build itself meets the bad target whether or
  // not default_config refuses it first.
  auto host_config = default_config(w, Target());
  ASSERT_TRUE(host_config.ok()) << host_config.status().to_string();
  ASSERT_TRUE(build_kernel(w, Target(), *host_config).ok());
  for (const char* text : {"llvm -mcpu=nonexistent", "llvm -mtriple=riscv64-linux-gnu -mattr=+v"}) {
    Target t = *parse_target(text);
    auto config = default_config(w, t);
    if (!config.ok()) {
      EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument) << text;
    }
    auto kernel = build_kernel(w, t, *host_config);
    ASSERT_FALSE(kernel.ok()) << text;
    EXPECT_EQ(kernel.status().code(), StatusCode::kInvalidArgument) << text << ": " << kernel.status().to_string();
  }
}

TEST(TargetCheck, LongTargetStringsAreRefused) {
  std::string text = "llvm -mattr=+avx2" + std::string(600, ',') ;
  auto t = parse_target(text);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("longer than the 256 allowed"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace tunefarm
