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

TEST(Logging, RefusesAnUnknownFormat) {
  Status bad = setup_logging("t4", "info", "xml");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), ::testing::HasSubstr("unknown log format 'xml'"));
  EXPECT_TRUE(setup_logging("t5", "info", "json").ok());
}

TEST(Logging, JsonStringsStayOneValidLine) {
  EXPECT_EQ(json_string("plain"), "\"plain\"");
  EXPECT_EQ(json_string("a\"b\\c\nd\te"), "\"a\\\"b\\\\c\\nd\\te\"");
  EXPECT_EQ(json_string(std::string("\x01\x7f", 2)), "\"\\u0001\\u007f\"");
  EXPECT_EQ(json_string("caf\xc3\xa9"), "\"caf\xc3\xa9\"");       // UTF-8 passes.
  EXPECT_EQ(json_string("bad\xff\xc3"), "\"bad\\ufffd\\ufffd\"");  // Stray bytes do not.
}

}  // namespace
}  // namespace tunefarm
