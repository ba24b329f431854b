#include "common/logging.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

namespace tunefarm {
namespace {

TEST(Logging, AcceptsKnownLevelsAndRejectsOthers) {
  EXPECT_TRUE(setup_logging("t1", "debug").ok());
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::debug);
  Status bad = setup_logging("t2", "loud");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), ::testing::HasSubstr("unknown log level 'loud'"));
  EXPECT_TRUE(setup_logging("t3", "off").ok());
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::off);
}

}  // namespace
}  // namespace tunefarm
