#include "common/workload.h"

#include <cstdio>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

TEST(WorkloadParse, AcceptsEveryPublicForm) {
  const char* lines[] = {
      "matmul:M=1024,N=1024,K=1024",
      "dense:M=1,N=1000,K=2048",
      "batch_matmul:B=12,M=128,N=128,K=64",
      "conv2d_nchw:N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1",
      "conv2d_nchw:N=1,C=3,H=224,W=224,K=64,R=7,S=7,stride=2,pad=3",
      "conv2d_nhwc:N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1",
      "depthwise_conv2d_nchw:N=1,C=32,H=112,W=112,R=3,S=3,stride=1,pad=1",
  };
  for (const char* line : lines) {
    auto w = parse_workload(line);
    ASSERT_TRUE(w.ok()) << line << ": " << w.status().to_string();
    // The public strings are already canonical.
    EXPECT_EQ(w->to_string(), line);
  }
}

TEST(WorkloadParse, FillsDefaultsAndKeepsSchemaOrder) {
  auto w = parse_workload("conv2d_nchw:S=3,R=3,K=8,W=9,H=9,C=4,N=2");
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->to_string(), "conv2d_nchw:N=2,C=4,H=9,W=9,K=8,R=3,S=3,stride=1,pad=0");
  EXPECT_EQ(w->param("dilation"), 1);
  EXPECT_EQ(w->param("stride"), 1);
  EXPECT_EQ(w->dtype, DType::kFloat32);
}

TEST(WorkloadParse, PrintsNonDefaultOptionalParameters) {
  auto w = parse_workload("dense:M=4,N=8,K=16,relu=1,dtype=float32");
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->to_string(), "dense:M=4,N=8,K=16,relu=1");
  EXPECT_EQ(w->param("bias"), 0);
  auto d = parse_workload("conv2d_nhwc:N=1,C=8,H=16,W=16,K=8,R=3,S=3,stride=1,pad=2,dilation=2");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->to_string(), "conv2d_nhwc:N=1,C=8,H=16,W=16,K=8,R=3,S=3,stride=1,pad=2,dilation=2");
}

TEST(WorkloadParse, ToleratesSurroundingWhitespace) {
  auto w = parse_workload("  matmul: M=2, N=3 ,K=4  ");
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->to_string(), "matmul:M=2,N=3,K=4");
}

struct BadCase {
  const char* text;
  const char* expected;  // A piece of the message that names what is wrong.
};

class WorkloadMalformed : public ::testing::TestWithParam<BadCase> {};

TEST_P(WorkloadMalformed, IsRejectedWithAMessageNamingTheProblem) {
  const BadCase& c = GetParam();
  auto w = parse_workload(c.text);
  ASSERT_FALSE(w.ok()) << "accepted: " << c.text;
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr(c.expected)) << c.text;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, WorkloadMalformed,
    ::testing::Values(
        BadCase{"", "empty workload"},
        BadCase{"   ", "empty workload"},
        BadCase{"matmul", "missing ':'"},
        BadCase{":M=1,N=1,K=1", "missing operator name"},
        BadCase{"gemm:M=1,N=1,K=1", "unknown operator 'gemm'"},
        BadCase{"matmul:", "no parameters"},
        BadCase{"matmul:M=1,N=1", "missing required parameter K"},
        BadCase{"matmul:M=1,,N=1,K=1", "empty parameter"},
        BadCase{"matmul:M=1,N=1,K=1,", "empty parameter"},
        BadCase{"matmul:M1,N=1,K=1", "parameter 'M1' has no '=VALUE'"},
        BadCase{"matmul:=4,N=1,K=1", "has no name"},
        BadCase{"matmul:M=,N=1,K=1", "parameter M has no value"},
        BadCase{"matmul:M=abc,N=1,K=1", "M='abc' is not an integer"},
        BadCase{"matmul:M=1.5,N=1,K=1", "M='1.5' is not an integer"},
        BadCase{"matmul:M=0,N=1,K=1", "M=0 is out of range"},
        BadCase{"matmul:M=-8,N=1,K=1", "M=-8 is out of range"},
        BadCase{"matmul:M=99999999999999999999,N=1,K=1", "out of range"},
        BadCase{"matmul:M=2000000,N=1,K=1", "M=2000000 is out of range"},
        BadCase{"matmul:M=1048576,N=1048576,K=1", "more than"},
        BadCase{"matmul:M=1,M=2,N=1,K=1", "parameter M is given twice"},
        BadCase{"matmul:M=1,N=1,K=1,X=3", "unknown parameter 'X' for matmul"},
        BadCase{"matmul:M=1,N=1,K=1,dtype=bfloat99", "unknown dtype 'bfloat99'"},
        BadCase{"matmul:M=1,N=1,K=1,dtype=int8", "dtype int8 is not supported by matmul"},
        BadCase{"matmul:M=1,N=1,K=1,dtype=float32,dtype=float32", "dtype is given twice"},
        BadCase{"matmul:M-1=2,N=1,K=1", "not an identifier"},
        BadCase{"dense:M=1,N=1,K=1,relu=2", "relu=2 is out of range [0, 1]"},
        BadCase{"conv2d_nchw:N=1,C=3,H=4,W=4,K=8,R=7,S=7,stride=1,pad=1", "output would be empty"},
        BadCase{"conv2d_nchw:N=1,C=3,H=8,W=8,K=8,R=3,S=3,stride=0,pad=1", "stride=0 is out of range"},
        BadCase{"conv2d_nchw:N=1,C=3,H=8,W=8,K=8,R=3,S=3,pad=3", "pad=3 must be smaller"},
        BadCase{"depthwise_conv2d_nchw:N=1,C=3,H=8,W=8,K=3,R=3,S=3", "unknown parameter 'K'"},
        BadCase{"conv2d_nchwc:N=1,C=16,H=8,W=8,K=16,R=1,S=1,ic_block=16,oc_block=16,relu=1,silu=1", "exclude each other"}));

TEST(WorkloadValidate, CatchesWorkloadsBuiltInCode) {
  Workload w{"matmul", {{"M", 4}, {"N", 4}, {"K", 0}}, DType::kFloat32};
  EXPECT_THAT(validate_workload(w).message(), HasSubstr("K=0 is out of range"));
  Workload dup{"matmul", {{"M", 4}, {"M", 4}, {"N", 4}, {"K", 4}}, DType::kFloat32};
  EXPECT_THAT(validate_workload(dup).message(), HasSubstr("given twice"));
  Workload good{"matmul", {{"M", 4}, {"N", 4}, {"K", 4}}, DType::kFloat32};
  EXPECT_TRUE(validate_workload(good).ok());
}

TEST(WorkloadReduction, CountsTheProductsEachOutputSums) {
  auto length = [](const char* text) { return reduction_length(*parse_workload(text)); };
  EXPECT_EQ(length("conv2d_nchw:N=1,C=512,H=28,W=28,K=512,R=3,S=3,stride=1,pad=1"), 4608);
  EXPECT_EQ(length("conv2d_nhwc:N=1,C=64,H=56,W=56,K=32,R=3,S=3,stride=1,pad=1"), 576);
  EXPECT_EQ(length("depthwise_conv2d_nchw:N=1,C=32,H=112,W=112,R=3,S=3,stride=1,pad=1"), 9);
  EXPECT_EQ(length("matmul:M=8,N=16,K=1024"), 1024);
  EXPECT_EQ(length("dense:M=1,N=1000,K=2048,bias=1"), 2048);
  EXPECT_EQ(length("batch_matmul:B=12,M=128,N=128,K=64"), 64);
}

TEST(WorkloadFile, ReadsCommentsAndBlankLinesAndReportsLineNumbers) {
  std::string path = ::testing::TempDir() + "/workloads.txt";
  {
    std::ofstream out(path);
    out << "# a comment\n\nmatmul:M=8,N=8,K=8   # trailing comment\nbatch_matmul:B=2,M=4,N=4,K=4\n";
  }
  auto ws = read_workload_file(path);
  ASSERT_TRUE(ws.ok()) << ws.status().to_string();
  ASSERT_EQ(ws->size(), 2u);
  EXPECT_EQ((*ws)[1].op, "batch_matmul");

  {
    std::ofstream out(path);
    out << "matmul:M=8,N=8,K=8\nmatmul:M=8\n";
  }
  auto bad = read_workload_file(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("workloads.txt:2"));
  EXPECT_THAT(bad.status().message(), HasSubstr("missing required parameter N"));
  std::remove(path.c_str());

  EXPECT_EQ(read_workload_file("/nonexistent/w.txt").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tunefarm
