#include "common/input_shape.h"

#include <gtest/gtest.h>

namespace tunefarm {
namespace {

TEST(InputShape, ParsesNameAndDimensionsAndRefusesTheRest) {
  auto ok = parse_input_shape("input=1,3,224,224");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->first, "input");
  EXPECT_EQ(ok->second, (std::vector<int64_t>{1, 3, 224, 224}));
  for (const char* bad : {"input", "=1,2", "input=", "input=1,,2", "input=1,x", "input=0,3", "input=-1", "x=1,99999999999"})
    EXPECT_FALSE(parse_input_shape(bad).ok()) << bad;
}

}  // namespace
}  // namespace tunefarm
