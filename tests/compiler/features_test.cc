// Loop-IR features: fixed length, finite, and telling apart what a cost model must tell apart.
#include <cmath>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "compiler/build.h"
#include "compiler/features/features.h"

namespace tunefarm {
namespace {

Config with_knob(Config c, const std::string& name, KnobValue v) {
  for (auto& [n, value] : c.knobs)
    if (n == name) value = std::move(v);
  return c;
}

TEST(CompilerFeatures, FixedLengthAndFiniteForEveryOperator) {
  EXPECT_EQ(features::feature_names().size(), static_cast<size_t>(features::kFeatureLength));
  for (const char* text : {"matmul:M=64,N=48,K=32", "dense:M=4,N=40,K=16,bias=1,relu=1", "batch_matmul:B=2,M=8,N=16,K=8",
                           "conv2d_nchw:N=1,C=8,H=10,W=10,K=8,R=3,S=3,stride=1,pad=1",
                           "conv2d_nhwc:N=1,C=8,H=10,W=10,K=16,R=3,S=3,stride=1,pad=1",
                           "depthwise_conv2d_nchw:N=1,C=4,H=10,W=10,R=3,S=3,stride=1,pad=1"}) {
    Workload w = *parse_workload(text);
    for (const Target& t : {Target{}, *parse_target("cuda -arch=sm_80")}) {
      auto f = candidate_features(w, t, *default_config(w, t));
      ASSERT_TRUE(f.ok()) << f.status().to_string();
      ASSERT_EQ(f->size(), static_cast<size_t>(features::kFeatureLength));
      for (float x : *f) EXPECT_TRUE(std::isfinite(x)) << text;
    }
  }
}

TEST(CompilerFeatures, ReflectScheduleChoices) {
  Workload w = *parse_workload("matmul:M=128,N=128,K=128");
  Config base = *default_config(w, Target{});
  auto names = features::feature_names();
  auto index = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  auto f = *candidate_features(w, Target{}, base);
  // The innermost loop of the micro-kernel is vectorized over 32 columns: unit stride, 5 = log2(33).
  EXPECT_EQ(f[index("loop7.vectorized")], 1.0f);
  EXPECT_NEAR(f[index("log_vector_lanes")], std::log2(33.0f), 1e-5);
  EXPECT_EQ(f[index("buffer0.unit_stride")], 1.0f);
  EXPECT_GT(f[index("log_flops")], 20.0f);

  auto par = *candidate_features(w, Target{}, with_knob(base, "parallel", std::string("outer")));
  float any_parallel = 0;
  for (int l = 0; l < 8; ++l) any_parallel += par[index(fmt::format("loop{}.parallel", l))];
  EXPECT_EQ(any_parallel, 1.0f);

  auto small_tile = *candidate_features(w, Target{}, with_knob(base, "tile_n", std::vector<int64_t>{-1, 1, 8}));
  EXPECT_NE(small_tile, f);
  EXPECT_LT(small_tile[index("log_vector_lanes")], f[index("log_vector_lanes")]);
}

TEST(CompilerFeatures, InvalidConfigIsAnError) {
  Workload w = *parse_workload("matmul:M=16,N=16,K=16");
  Config c = *default_config(w, Target{});
  c.template_name = "nope";
  EXPECT_FALSE(candidate_features(w, Target{}, c).ok());
}

}  // namespace
}  // namespace tunefarm
