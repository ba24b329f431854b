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
