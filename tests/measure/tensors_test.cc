#include "measure/tensors.h"

#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>
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

// Inputs are uniform in [-1, 1): a kernel's rounding errors and the correctness check's tolerance
// assume values of that size, of both signs.
TEST(Tensors, FloatInputsAreUniformBetweenMinusOneAndOne) {
  auto t = allocate_tensors(args(v1::FLOAT32, {256, 256}));
  ASSERT_TRUE(t.ok());
  fill_tensors(*t, 11);
  const float* a = reinterpret_cast<const float*>((*t)[0].data.get());
  double sum = 0;
  int below = 0, distinct_signs[2] = {0, 0};
  for (int i = 0; i < 256 * 256; ++i) {
    ASSERT_GE(a[i], -1.0f);
    ASSERT_LT(a[i], 1.0f);
    sum += a[i];
    below += a[i] < -0.5f;
    ++distinct_signs[a[i] < 0];
  }
  EXPECT_NEAR(sum / 65536, 0.0, 0.01);
  EXPECT_NEAR(below / 65536.0, 0.25, 0.01) << "a quarter of the values below -0.5";
  EXPECT_GT(distinct_signs[0], 30000);
  EXPECT_GT(distinct_signs[1], 30000);
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
  EXPECT_TRUE(compare_outputs(*t, expected, Tolerance{1e-4, 1e-5}).ok());
  c[2] = 1.1f;
  Status s = compare_outputs(*t, expected, Tolerance{1e-4, 1e-5});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("C[2]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1 of 4"), std::string::npos) << s.message();
}

// Outputs that each sum K = 4,608 float32 products (a 512-channel 3x3 convolution): the reference
// sums them in order, as the naive reference kernel does, and the candidate in 8 lanes, as a
// vectorized kernel does. Both are right; they differ only by rounding.
struct LongSums {
  static constexpr int64_t kK = 4608;
  static constexpr int64_t kOutputs = 4096;
  std::vector<HostTensor> tensors;
  std::vector<std::string> reference;

  LongSums() {
    google::protobuf::RepeatedPtrField<v1::TensorArg> arg;
    arg.Add()->set_name("C");
    arg[0].add_shape(kOutputs);
    arg[0].set_dtype(v1::FLOAT32);
    arg[0].set_is_output(true);
    auto allocated = allocate_tensors(arg);
    tensors = std::move(*allocated);
    std::vector<float> sequential(kOutputs);
    float* candidate = reinterpret_cast<float*>(tensors[0].data.get());
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (int64_t i = 0; i < kOutputs; ++i) {
      float lanes[8] = {};
      for (int64_t k = 0; k < kK; ++k) {
        float product = value(rng) * value(rng);
        sequential[i] += product;
        lanes[k % 8] += product;
      }
      candidate[i] = 0;
      for (float lane : lanes) candidate[i] += lane;
    }
    reference = {std::string(reinterpret_cast<const char*>(sequential.data()), kOutputs * sizeof(float))};
  }
  float& candidate(int64_t i) { return reinterpret_cast<float*>(tensors[0].data.get())[i]; }
  float expected(int64_t i) const { return reinterpret_cast<const float*>(reference[0].data())[i]; }
};

TEST(Tensors, LongSumsThatDifferByRoundingPassTheScaledCheck) {
  LongSums sums;
  EXPECT_FALSE(compare_outputs(sums.tensors, sums.reference, Tolerance{kDefaultRtol, kDefaultAtol}).ok())
      << "the two orders of summation should differ by more than an unscaled tolerance";
  Status s = compare_outputs(sums.tensors, sums.reference, scaled_tolerance(kDefaultRtol, kDefaultAtol, LongSums::kK));
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(Tensors, LongSumsWithOneElementOnePercentOffFailTheScaledCheck) {
  LongSums sums;
  // An element of typical size, sqrt(K) / 3 = 23 for these inputs.
  int64_t typical = 0;
  while (std::fabs(sums.expected(typical)) < 10) ++typical;
  sums.candidate(typical) *= 1.01f;
  Status s = compare_outputs(sums.tensors, sums.reference, scaled_tolerance(kDefaultRtol, kDefaultAtol, LongSums::kK));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(fmt::format("C[{}]", typical)), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1 of 4096"), std::string::npos) << s.message();
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
