// Helpers shared by the compiler tests: random inputs, running a JIT kernel on them, comparing
// with the naive reference.
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/build.h"

namespace tunefarm::testing_util {

inline std::vector<float> random_vector(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

struct Buffers {
  std::vector<std::vector<float>> inputs;
  std::vector<float> output;
  std::vector<float> expected;

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
  EXPECT_TRUE(run_reference(w, in, b.expected.data()).ok());
  return b;
}

// Within rtol 1e-4 (with a small absolute floor for results near zero). Returns a message on
// the first mismatch, empty when all match.
inline std::string compare(const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    float tol = 1e-4f * std::max(1.0f, std::fabs(want[i]));
    if (!(std::fabs(got[i] - want[i]) <= tol))
      return "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " + std::to_string(want[i]);
  }
  return "";
}

}  // namespace tunefarm::testing_util
