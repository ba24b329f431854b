#include "common/wire/wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

TEST(Wire, WorkloadRoundTripsThroughProto) {
  auto w = parse_workload("conv2d_nhwc:N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1");
  ASSERT_TRUE(w.ok());
  v1::Workload p = to_proto(*w);
  EXPECT_EQ(p.op(), "conv2d_nhwc");
  EXPECT_EQ(p.dtype(), v1::FLOAT32);
  std::string bytes = p.SerializeAsString();
  v1::Workload decoded;
  ASSERT_TRUE(decoded.ParseFromString(bytes));
  auto back = from_proto(decoded);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, *w);
}

TEST(Wire, InvalidWireWorkloadsAreRejected) {
  v1::Workload p;
  p.set_op("matmul");
  auto* m = p.add_params();
  m->set_name("M");
  m->set_value(-1);
  EXPECT_THAT(from_proto(p).status().message(), HasSubstr("M=-1 is out of range"));
  p.set_op("nonsense");
  EXPECT_THAT(from_proto(p).status().message(), HasSubstr("unknown operator"));
  v1::Workload bad_dtype;
  bad_dtype.set_op("matmul");
  bad_dtype.set_dtype(static_cast<v1::DType>(77));
  EXPECT_FALSE(from_proto(bad_dtype).ok());
}

TEST(Wire, TargetRoundTripsThroughProto) {
  for (const char* text : {"llvm", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", "cuda -arch=sm_90"}) {
    auto t = parse_target(text);
    ASSERT_TRUE(t.ok());
    auto back = from_proto(to_proto(*t));
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->to_string(), text);
  }
  v1::Target bad;
  bad.set_kind("vulkan");
  EXPECT_THAT(from_proto(bad).status().message(), HasSubstr("unknown target kind"));
}

TEST(Wire, StatusMapsToGrpcCodes) {
  grpc::Status g = to_grpc(invalid_argument("bad trials"));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(g.error_message(), "bad trials");
  EXPECT_EQ(from_grpc(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no token")).code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(to_grpc(Status()).ok());
}

}  // namespace
}  // namespace tunefarm

namespace tunefarm {
namespace {

TEST(Wire, ConfigRoundTripsThroughProto) {
  Config c{"t", {{"a", int64_t{4}}, {"b", std::string("x")}, {"c", std::vector<int64_t>{-1, 4}}}};
  v1::Config p = to_proto(c);
  EXPECT_EQ(p.knobs_size(), 3);
  EXPECT_EQ(from_proto(p), c);
}

}  // namespace
}  // namespace tunefarm
