#include "common/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

TEST(ConfigJson, RoundTripsAndKeepsKnobOrder) {
  Config c{"matmul.cpu.blocked",
           {{"tile_n", std::vector<int64_t>{-1, 2, 16}}, {"tile_m", std::vector<int64_t>{-1, 6}},
            {"unroll", std::string("on")}, {"order", int64_t{3}}}};
  std::string j = c.to_json();
  EXPECT_EQ(j,
            R"({"template":"matmul.cpu.blocked","knobs":{"tile_n":[-1,2,16],"tile_m":[-1,6],"unroll":"on","order":3}})");
  auto back = parse_config_json(j);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, c);
  ASSERT_NE(back->find("order"), nullptr);
  EXPECT_EQ(std::get<int64_t>(*back->find("order")), 3);
  EXPECT_EQ(back->find("nope"), nullptr);
}

TEST(ConfigJson, RejectsMalformedInput) {
  struct Case { const char* text; const char* expected; };
  const Case cases[] = {
      {"", "not valid JSON"},
      {"[1,2]", "expected an object"},
      {R"({"knobs":{}})", "missing or empty \"template\""},
      {R"({"template":"t"})", "missing \"knobs\""},
      {R"({"template":"t","knobs":{"a":1.5}})", "knob \"a\" must be an integer"},
      {R"({"template":"t","knobs":{"a":[1,"x"]}})", "must be a list of integers"},
      {R"({"template":"t","knobs":{},"extra":1})", "unknown field \"extra\""},
      {R"({"template":"t","knobs":{"a":1,"a":2}})", "\"a\" is given twice"},
      {R"({"template":"t","template":"u","knobs":{}})", "\"template\" is given twice"},
  };
  for (const auto& c : cases) {
    auto r = parse_config_json(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(c.expected)) << c.text;
  }
}

}  // namespace
}  // namespace tunefarm
