// Helpers shared by the compiler tests: random inputs, running a JIT kernel on them, comparing
// with the naive reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/operators/operator.h"
#include "compiler/build.h"

namespace tunefarm::testing_util {

// Small and odd shapes (primes, sizes just off the vector width, strides, dilation): every
// operator twice, so that random configs hit non-dividing splits.
inline const std::vector<std::string>& small_workloads() {
  static const std::vector<std::string> kWorkloads = {
      "matmul:M=37,N=45,K=19",
      "matmul:M=5,N=70,K=33",
      "dense:M=3,N=41,K=29,bias=1,relu=1",
      "dense:M=17,N=20,K=13",
      // A GEMV without an epilogue: the dot template's horizontal sums in the output stage itself.
      "dense:M=1,N=23,K=37",
      // K long enough for the K-blocked path (tile_k 128..512; 700 leaves a partial block).
      "matmul:M=13,N=40,K=700",
      "dense:M=9,N=33,K=300,bias=1,relu=1",
      // W in panels of 16 (a model's prepacked weight), the last panel padded; and K long enough
      // for the K-blocked path with its partial block.
      "dense:M=10,N=37,K=21,bias=1,w_block=16",
      "dense:M=3,N=41,K=29,residual=1,gelu=1",
      "dense:M=10,N=37,K=21,bias=1,residual=1,gelu=1,w_block=16",
      // GPT-2's FFN: GELU's tanh approximation in the epilogue.
      "dense:M=5,N=52,K=19,bias=1,gelu_tanh=1,w_block=16",
      "dense:M=7,N=48,K=300,w_block=48",
      "batch_matmul:B=3,M=11,N=35,K=9",
      "batch_matmul:B=2,M=20,N=17,K=24",
      "conv2d_nchw:N=1,C=5,H=9,W=11,K=7,R=3,S=3,stride=1,pad=1",
      "conv2d_nchw:N=2,C=3,H=10,W=13,K=6,R=3,S=2,stride=2,pad=1,dilation=2",
      "conv2d_nchw:N=1,C=2,H=11,W=14,K=5,R=2,S=4,stride=3,pad=0",
      "conv2d_nhwc:N=1,C=5,H=9,W=11,K=7,R=3,S=3,stride=1,pad=1",
      "conv2d_nhwc:N=2,C=4,H=8,W=7,K=19,R=2,S=3,stride=2,pad=0",
      "depthwise_conv2d_nchw:N=1,C=5,H=9,W=11,R=3,S=3,stride=1,pad=1",
      "depthwise_conv2d_nchw:N=2,C=3,H=12,W=10,R=5,S=3,stride=2,pad=2",
  };
  return kWorkloads;
}

// Channel-blocked convolutions (CPU templates only): blocks that are and are not the vector width,
// strides, padding, a 1x1 and a 5x5 window.
inline const std::vector<std::string>& blocked_workloads() {
  static const std::vector<std::string> kWorkloads = {
      "conv2d_nchwc:N=1,C=16,H=7,W=9,K=32,R=3,S=3,stride=1,pad=1,ic_block=8,oc_block=16",
      "conv2d_nchwc:N=2,C=6,H=11,W=10,K=8,R=5,S=5,stride=2,pad=2,ic_block=3,oc_block=8",
      "conv2d_nchwc:N=1,C=32,H=5,W=5,K=48,R=1,S=1,stride=1,pad=0,ic_block=16,oc_block=16",
      // A small map whose border rows are peeled and skip the padding's taps.
      "conv2d_nchwc:N=1,C=32,H=5,W=5,K=32,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16",
      "conv2d_nchwc:N=1,C=4,H=9,W=13,K=20,R=3,S=2,stride=3,pad=1,dilation=2,ic_block=4,oc_block=20",
      // A row no column tile divides: the default's tile is the whole row of 13.
      "conv2d_nchwc:N=1,C=32,H=13,W=13,K=64,R=1,S=1,stride=1,pad=0,ic_block=16,oc_block=16",
      "depthwise_conv2d_nchwc:N=1,C=32,H=9,W=11,R=3,S=3,stride=1,pad=1,block=16",
      "depthwise_conv2d_nchwc:N=2,C=24,H=12,W=10,R=5,S=3,stride=2,pad=2,block=8",
      // Epilogues in the output stage: bias, a residual tensor, ReLU or ReLU6.
      "conv2d_nchwc:N=1,C=16,H=6,W=7,K=24,R=3,S=3,stride=1,pad=1,ic_block=8,oc_block=8,bias=1,residual=1,relu=1",
      "conv2d_nchwc:N=1,C=3,H=11,W=9,K=16,R=3,S=3,stride=2,pad=1,ic_block=3,oc_block=16,bias=1,relu6=1",
      "depthwise_conv2d_nchwc:N=1,C=32,H=7,W=10,R=3,S=3,stride=2,pad=1,block=16,bias=1,relu6=1",
      // Eight channel blocks: threads take blocks rather than blocks and rows fused.
      "depthwise_conv2d_nchwc:N=1,C=64,H=5,W=6,R=3,S=3,stride=1,pad=1,block=8,residual=1",
      // EfficientNet's SiLU and MobileNetV3's HardSwish (a 5x5 depthwise window at stride 2).
      "conv2d_nchwc:N=1,C=16,H=6,W=7,K=32,R=1,S=1,stride=1,pad=0,ic_block=16,oc_block=16,bias=1,silu=1",
      "depthwise_conv2d_nchwc:N=1,C=32,H=9,W=9,R=5,S=5,stride=2,pad=2,block=16,bias=1,hardswish=1",
      // Winograd (the weight transformed): outputs that are not whole tiles (7x9 in tiles of 4,
      // 5x7 in tiles of 2), padding 1 and 0, input and output blocks that differ, an epilogue.
      "conv2d_nchwc:N=1,C=16,H=7,W=9,K=32,R=3,S=3,stride=1,pad=1,ic_block=8,oc_block=16,winograd=4",
      "conv2d_nchwc:N=1,C=12,H=7,W=9,K=16,R=3,S=3,stride=1,pad=0,ic_block=4,oc_block=8,bias=1,residual=1,relu=1,winograd=2",
      "conv2d_nchwc:N=2,C=16,H=6,W=5,K=16,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16,bias=1,relu6=1,winograd=4",
      // Blocks of one vector and a half and two and a half (MobileNetV3's 72 and 120 channels as
      // 24s and 40s: model/tasks.cc's channel_block), direct, depthwise and Winograd.
      "conv2d_nchwc:N=1,C=24,H=7,W=9,K=40,R=1,S=1,stride=1,pad=0,ic_block=24,oc_block=40,bias=1,hardswish=1",
      "conv2d_nchwc:N=1,C=40,H=6,W=7,K=24,R=3,S=3,stride=2,pad=1,ic_block=40,oc_block=24,residual=1",
      "depthwise_conv2d_nchwc:N=1,C=72,H=9,W=8,R=5,S=5,stride=2,pad=2,block=24,bias=1,relu=1",
      "depthwise_conv2d_nchwc:N=1,C=40,H=7,W=7,R=3,S=3,stride=1,pad=1,block=40,bias=1,hardswish=1",
      "conv2d_nchwc:N=1,C=24,H=7,W=6,K=48,R=3,S=3,stride=1,pad=1,ic_block=24,oc_block=24,bias=1,relu=1,winograd=2",
      // Blocks of 44 (MobileNetV3's 88 channels): two vectors and three quarters.
      "conv2d_nchwc:N=1,C=24,H=6,W=7,K=88,R=1,S=1,stride=1,pad=0,ic_block=24,oc_block=44,bias=1,relu=1",
      "depthwise_conv2d_nchwc:N=1,C=88,H=7,W=6,R=3,S=3,stride=1,pad=1,block=44,bias=1,relu=1",
      "conv2d_nchwc:N=1,C=88,H=5,W=6,K=24,R=1,S=1,stride=1,pad=0,ic_block=44,oc_block=24,bias=1,residual=1",
  };
  return kWorkloads;
}

// `count` distinct random valid configs of a space (fewer if the space has fewer).
inline std::vector<Config> random_valid_configs(const ops::ConfigSpace& space, int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Config> out;
  for (int attempt = 0; static_cast<int>(out.size()) < count && attempt < 100000; ++attempt) {
    auto c = space.get(static_cast<int64_t>(rng() % space.size()));
    if (c.ok() && space.check(*c).ok() && std::find(out.begin(), out.end(), *c) == out.end()) out.push_back(*c);
  }
  return out;
}

// Number of configs per workload and template; two workloads per operator make 50 per template.
inline int configs_per_workload() {
  const char* env = std::getenv("TUNEFARM_TEST_CONFIGS");
  return env ? std::atoi(env) : 25;
}

inline std::vector<float> random_vector(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// How much further than a direct sum a kernel of `w` may round from the reference: as much as
// the farm's check allows (measure/tolerance.h scales by the square root of the reduction length),
// which for a Winograd convolution is alpha^2 / 3 times the direct one's.
inline float tolerance_scale(const Workload& w) {
  if (w.op != "conv2d_nchwc" || w.param("winograd") == 0) return 1.0f;
  operators::ConvShape c = operators::conv_shape(w);
  return std::sqrt(static_cast<float>(reduction_length(w)) / static_cast<float>(c.C * c.R * c.S));
}

struct Buffers {
  std::vector<std::vector<float>> inputs;
  std::vector<float> output;
  std::vector<float> expected;
  float tolerance_scale = 1.0f;  // what compare() is to allow for this workload

  std::vector<void*> arg_pointers() {
    std::vector<void*> p;
    for (auto& in : inputs) p.push_back(in.data());
    p.push_back(output.data());
    return p;
  }
};

// Random inputs and the reference output for a workload.
inline Buffers make_buffers(const Workload& w, uint32_t seed) {
  Buffers b;
  auto args = kernel_args(w);
  EXPECT_TRUE(args.ok()) << args.status().to_string();
  std::vector<const float*> in;
  for (size_t i = 0; i + 1 < args->size(); ++i) b.inputs.push_back(random_vector((*args)[i].num_elements(), seed + i));
  for (auto& v : b.inputs) in.push_back(v.data());
  b.output.assign(args->back().num_elements(), std::nanf(""));
  b.expected.assign(args->back().num_elements(), 0.0f);
  b.tolerance_scale = tolerance_scale(w);
  EXPECT_TRUE(run_reference(w, in, b.expected.data()).ok());
  return b;
}

// Within rtol 1e-4 (with a small absolute floor for results near zero), times `scale`
// (tolerance_scale). Returns a message on the first mismatch, empty when all match.
inline std::string compare(const std::vector<float>& got, const std::vector<float>& want, float scale = 1.0f) {
  for (size_t i = 0; i < want.size(); ++i) {
    float tol = scale * 1e-4f * std::max(1.0f, std::fabs(want[i]));
    if (!(std::fabs(got[i] - want[i]) <= tol))
      return "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " + std::to_string(want[i]);
  }
  return "";
}

}  // namespace tunefarm::testing_util
