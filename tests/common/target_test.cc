#include "common/target.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

TEST(TargetParse, AcceptsTvmSpellings) {
  auto host = parse_target("llvm");
  ASSERT_TRUE(host.ok());
  EXPECT_TRUE(host->is_host());
  EXPECT_EQ(host->to_string(), "llvm");

  auto arm = parse_target("llvm  -mtriple=aarch64-linux-gnu -mcpu=cortex-a72");
  ASSERT_TRUE(arm.ok()) << arm.status().to_string();
  EXPECT_EQ(arm->mtriple, "aarch64-linux-gnu");
  EXPECT_EQ(arm->mcpu, "cortex-a72");
  EXPECT_FALSE(arm->is_host());
  EXPECT_EQ(arm->to_string(), "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72");

  auto cuda = parse_target("cuda -arch=sm_90");
  ASSERT_TRUE(cuda.ok());
  EXPECT_EQ(cuda->kind, Target::Kind::kCUDA);
  EXPECT_EQ(cuda->arch, "sm_90");
  EXPECT_EQ(parse_target("cuda")->arch, "sm_75");
  EXPECT_EQ(parse_target("llvm -mattr=+avx2,-avx512f")->mattr, "+avx2,-avx512f");
}

TEST(TargetParse, RejectsMalformedStrings) {
  struct Case { const char* text; const char* expected; };
  const Case cases[] = {
      {"", "empty target"},
      {"opencl", "unknown target kind 'opencl'"},
      {"llvm mtriple=x", "must look like -name=value"},
      {"llvm -mtriple", "has no '=value'"},
      {"llvm -mtriple=", "empty value"},
      {"llvm -mcpu=a -mcpu=b", "-mcpu is given twice"},
      {"llvm -arch=sm_90", "unknown option -arch for llvm"},
      {"cuda -mcpu=x", "unknown option -mcpu for cuda"},
      {"cuda -arch=sm_70", "sm_70 is not supported"},
      {"cuda -arch=compute_90", "must look like sm_NN"},
      {"llvm -mcpu=$(rm)", "invalid characters"},
  };
  for (const auto& c : cases) {
    auto t = parse_target(c.text);
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), HasSubstr(c.expected)) << c.text;
  }
}

}  // namespace
}  // namespace tunefarm
