#include "common/status.h"

#include <gtest/gtest.h>

namespace tunefarm {
namespace {

StatusOr<int> half(int x) {
  if (x % 2) return invalid_argument("odd");
  return x / 2;
}

StatusOr<int> quarter(int x) {
  TF_ASSIGN_OR_RETURN(int h, half(x));
  TF_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

Status check_even(int x) {
  TF_RETURN_IF_ERROR(half(x).status());
  return Status();
}

TEST(Status, CarriesCodeAndMessage) {
  Status s = not_found("job 'x' does not exist");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.to_string(), "NOT_FOUND: job 'x' does not exist");
  EXPECT_EQ(s.with_context("tunerd").message(), "tunerd: job 'x' does not exist");
  EXPECT_TRUE(Status().ok());
  EXPECT_EQ(Status().to_string(), "OK");
}

TEST(StatusOr, PropagatesErrorsThroughMacros) {
  EXPECT_EQ(*quarter(8), 2);
  auto bad = quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "odd");
  EXPECT_TRUE(check_even(4).ok());
  EXPECT_EQ(check_even(3).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tunefarm

#include "common/address.h"

namespace tunefarm {
namespace {

TEST(Address, LoopbackIsRecognised) {
  EXPECT_TRUE(is_loopback_address("127.0.0.1:9190"));
  EXPECT_TRUE(is_loopback_address("localhost:9191"));
  EXPECT_TRUE(is_loopback_address("[::1]:9190"));
  EXPECT_TRUE(is_loopback_address("unix:/run/tunefarm.sock"));
  EXPECT_FALSE(is_loopback_address("0.0.0.0:9190"));
  EXPECT_FALSE(is_loopback_address("10.1.2.3:9190"));
  EXPECT_FALSE(is_loopback_address("[::]:9190"));
  EXPECT_FALSE(is_loopback_address("lab-tracker:9190"));
}

}  // namespace
}  // namespace tunefarm
