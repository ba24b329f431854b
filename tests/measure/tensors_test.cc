#include "measure/tensors.h"

#include <cstring>

#include <gtest/gtest.h>

namespace tunefarm {
namespace {

google::protobuf::RepeatedPtrField<v1::TensorArg> args(v1::DType dtype, std::vector<int64_t> shape) {
  google::protobuf::RepeatedPtrField<v1::TensorArg> out;
  for (const char* name : {"A", "C"}) {
    auto* a = out.Add();
    a->set_name(name);
    for (auto d : shape) a->add_shape(d);
    a->set_dtype(dtype);
    a->set_is_output(std::string(name) == "C");
  }
  return out;
}

TEST(Tensors, SameSeedSameInputsOtherSeedOtherInputs) {
  auto a = allocate_tensors(args(v1::FLOAT32, {8, 8}));
  auto b = allocate_tensors(args(v1::FLOAT32, {8, 8}));
  ASSERT_TRUE(a.ok() && b.ok());
  fill_tensors(*a, 7);
  fill_tensors(*b, 7);
  EXPECT_EQ(0, std::memcmp((*a)[0].data.get(), (*b)[0].data.get(), 256));
  fill_tensors(*b, 8);
  EXPECT_NE(0, std::memcmp((*a)[0].data.get(), (*b)[0].data.get(), 256));
  const float* out = reinterpret_cast<const float*>((*a)[1].data.get());
  EXPECT_EQ(out[0], 0.0f);
}

TEST(Tensors, RejectsBadShapesAndDtypes) {
  EXPECT_FALSE(allocate_tensors(args(v1::FLOAT32, {8, 0})).ok());
  EXPECT_FALSE(allocate_tensors(args(v1::FLOAT32, {})).ok());
  EXPECT_FALSE(allocate_tensors(args(v1::DTYPE_UNSPECIFIED, {4})).ok());
  auto huge = allocate_tensors(args(v1::FLOAT64, {1 << 20, 1 << 20}));
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("'A'"), std::string::npos);
}

TEST(Tensors, CompareHonoursTolerances) {
  auto t = allocate_tensors(args(v1::FLOAT32, {4}));
  ASSERT_TRUE(t.ok());
  float* c = reinterpret_cast<float*>((*t)[1].data.get());
  for (int i = 0; i < 4; ++i) c[i] = 1.0f;
  std::vector<std::string> expected = output_bytes(*t);
  c[2] = 1.00001f;
  EXPECT_TRUE(compare_outputs(*t, expected, 1e-4, 1e-5).ok());
  c[2] = 1.1f;
  Status s = compare_outputs(*t, expected, 1e-4, 1e-5);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("C[2]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1 of 4"), std::string::npos) << s.message();
}

TEST(Tensors, HalfAndIntegerInputsAreFilled) {
  for (auto dtype : {v1::FLOAT16, v1::INT8, v1::INT32, v1::UINT8}) {
    auto t = allocate_tensors(args(dtype, {64}));
    ASSERT_TRUE(t.ok());
    fill_tensors(*t, 3);
    int nonzero = 0;
    for (int64_t i = 0; i < (*t)[0].bytes; ++i) nonzero += (*t)[0].data.get()[i] != std::byte{0};
    EXPECT_GT(nonzero, 8) << dtype;
  }
}

}  // namespace
}  // namespace tunefarm
