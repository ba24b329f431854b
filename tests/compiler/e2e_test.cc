// End to end on the host: te -> schedule -> lower -> LLVM -> JIT and shared object -> the same
// numbers as plain loops.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <random>

#include <gtest/gtest.h>

#include "compiler/codegen/codegen.h"
#include "compiler/ir/printer.h"
#include "compiler/lower/lower.h"
#include "compiler/schedule/schedule.h"
#include "compiler/te/tensor.h"
#include "compiler/runtime/kernel_runtime.h"

namespace tunefarm {
namespace {

using ir::Var;

struct Matmul {
  te::Tensor A, B, C;
  te::IterVar k;
};

Matmul define_matmul(int64_t M, int64_t N, int64_t K) {
  Matmul m;
  m.A = te::placeholder("A", {M, K});
  m.B = te::placeholder("B", {K, N});
  m.k = te::reduce_axis(K, "k");
  m.C = te::compute("C", {M, N}, [&](const std::vector<Var>& i) {
    return te::sum(m.A(i[0], m.k->var) * m.B(m.k->var, i[1]), {m.k});
  }, {"i", "j"});
  return m;
}

std::vector<float> random_vector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<float> naive_matmul(const std::vector<float>& a, const std::vector<float>& b, int64_t M, int64_t N, int64_t K) {
  std::vector<float> c(M * N, 0.0f);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(a[i * K + k]) * b[k * N + j];
      c[i * N + j] = float(acc);
    }
  return c;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << "at " << i;
}

Target host() { return *parse_target("llvm"); }

// Runs `f` through the JIT and through a dlopen'ed shared object; both must match plain loops.
void check_matmul(const ir::LoweredFunc& f, int64_t M, int64_t N, int64_t K) {
  auto a = random_vector(M * K, 1), b = random_vector(K * N, 2);
  auto want = naive_matmul(a, b, M, N, K);
  auto obj = codegen::compile_object(f, host(), "kernel");
  ASSERT_TRUE(obj.ok()) << obj.status().to_string();

  auto jit = codegen::JitKernel::create(*obj, "kernel");
  ASSERT_TRUE(jit.ok()) << jit.status().to_string();
  std::vector<float> c(M * N, -7.0f);
  void* args[] = {a.data(), b.data(), c.data()};
  ASSERT_EQ((*jit)->run(args), 0);
  expect_close(c, want);

  auto so = codegen::link_shared_object(*obj, host());
  ASSERT_TRUE(so.ok()) << so.status().to_string();
  std::string path = testing::TempDir() + "/e2e_kernel_" + std::to_string(getpid()) + ".so";
  { std::ofstream(path, std::ios::binary).write(so->data(), so->size()); }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto fn = reinterpret_cast<codegen::KernelFn>(dlsym(handle, "kernel"));
  ASSERT_NE(fn, nullptr);
  std::fill(c.begin(), c.end(), -7.0f);
  ASSERT_EQ(fn(args), 0);
  expect_close(c, want);
  dlclose(handle);
  std::remove(path.c_str());
}

// Lowers `s` over `args`, compiles it and loads it through the JIT as "kernel"; nullptr (and a
// failure) where a step fails. `ir_text` receives the lowered loops, for messages.
std::unique_ptr<codegen::JitKernel> jit_kernel(schedule::Schedule& s, const std::vector<te::Tensor>& args,
                                              std::string* ir_text) {
  auto f = lower::lower(s, args, "kernel");
  if (!f.ok()) {
    ADD_FAILURE() << f.status().to_string();
    return nullptr;
  }
  *ir_text = ir::to_string(*f);
  auto obj = codegen::compile_object(*f, host(), "kernel");
  if (!obj.ok()) {
    ADD_FAILURE() << obj.status().to_string();
    return nullptr;
  }
  auto jit = codegen::JitKernel::create(*obj, "kernel");
  if (!jit.ok()) {
    ADD_FAILURE() << jit.status().to_string();
    return nullptr;
  }
  return std::move(*jit);
}

TEST(EndToEnd, NaiveMatmul) {
  auto m = define_matmul(13, 7, 5);
  schedule::Schedule s({m.C});
  auto f = lower::lower(s, {m.A, m.B, m.C}, "kernel");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  SCOPED_TRACE(ir::to_string(*f));
  check_matmul(*f, 13, 7, 5);
}

// Register tile with a local accumulator, non-dividing splits, vectorized and unrolled inner
// loops, and a parallel outer loop.
TEST(EndToEnd, TiledMatmulWithTails) {
  const int64_t M = 37, N = 45, K = 19;
  auto m = define_matmul(M, N, K);
  schedule::Schedule s({m.C});
  auto CL = s.cache_write(m.C, ir::MemScope::kLocal);
  auto& c = s[m.C];
  auto [io, ii] = c.split(c.axis(0), 4);
  auto [jo, ji] = c.split(c.axis(1), 16);
  c.reorder({io, jo, ii, ji});
  c.unroll(ii);
  c.vectorize(ji);
  c.parallel(io);
  auto& cl = s[CL];
  cl.compute_at(c, jo);
  auto [ko, ki] = cl.split(cl.reduce_axis(0), 4);
  cl.reorder({ko, ki, cl.axis(0), cl.axis(1)});
  cl.unroll(ki);
  cl.unroll(cl.axis(0));
  cl.vectorize(cl.axis(1));
  auto f = lower::lower(s, {m.A, m.B, m.C}, "kernel");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  SCOPED_TRACE(ir::to_string(*f));
  check_matmul(*f, M, N, K);

  // The host code uses the full vector width: 16-float vectors and 512-bit preference.
  auto llvm_ir = codegen::emit_llvm_ir(*f, host(), "kernel");
  ASSERT_TRUE(llvm_ir.ok()) << llvm_ir.status().to_string();
  EXPECT_NE(llvm_ir->find("<16 x float>"), std::string::npos);
  EXPECT_NE(llvm_ir->find("\"prefer-vector-width\"=\"512\""), std::string::npos);
  EXPECT_NE(llvm_ir->find("tunefarm_parallel_launch"), std::string::npos);
}

// A max reduction (pooling-style) with fused, parallel and vectorized loops.
TEST(EndToEnd, MaxReductionWithFusedParallelLoops) {
  const int64_t B = 3, R = 10, C = 37;
  te::Tensor x = te::placeholder("x", {B, R, C});
  auto r = te::reduce_axis(R, "r");
  te::Tensor y = te::compute("y", {B, C}, [&](const std::vector<Var>& i) {
    return te::max_reduce(x(i[0], r->var, i[1]), {r});
  }, {"b", "c"});
  schedule::Schedule s({y});
  auto& st = s[y];
  auto [co, ci] = st.split(st.axis(1), 16);
  st.reorder({st.axis(0), co, r, ci});
  te::IterVar bc = st.fuse(st.axis(0), co);
  st.parallel(bc);
  st.vectorize(ci);
  std::string ir_text;
  auto jit = jit_kernel(s, {x, y}, &ir_text);
  ASSERT_NE(jit, nullptr);
  auto in = random_vector(B * R * C, 5);
  std::vector<float> out(B * C, 0.0f), want(B * C, -1e30f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t rr = 0; rr < R; ++rr)
      for (int64_t c = 0; c < C; ++c) want[b * C + c] = std::max(want[b * C + c], in[(b * R + rr) * C + c]);
  void* args[] = {in.data(), out.data()};
  ASSERT_EQ(jit->run(args), 0);
  EXPECT_EQ(out, want) << ir_text;
}

// `name` applied to `in` by a kernel vectorized in 16s (points past the last multiple of 16 are the
// scalar tail); `ir_text` gets the kernel's IR. Empty where it did not compile or run.
std::vector<float> apply_math_function(const std::string& name, const std::vector<float>& in, std::string* ir_text) {
  const auto N = static_cast<int64_t>(in.size());
  te::Tensor x = te::placeholder("x", {N});
  te::Tensor y = te::compute("y", {N}, [&](const std::vector<Var>& i) { return ir::call(ir::Type::f32(), name, {x(i[0])}); },
                             {"i"});
  schedule::Schedule s({y});
  auto& st = s[y];
  auto [io, ii] = st.split(st.axis(0), 16);
  st.vectorize(ii);
  auto jit = jit_kernel(s, {x, y}, ir_text);
  if (!jit) return {};
  std::vector<float> out(in.size(), 7.0f);
  void* args[] = {const_cast<float*>(in.data()), out.data()};
  if (jit->run(args) != 0) return {};
  return out;
}

// Each of `name`'s values within `tolerance` of `reference`, relative to max(1, |reference|) where
// `relative`, else absolute; where the reference is NaN or infinite, the same.
void expect_math_function(const std::string& name, const std::vector<float>& in, float (*reference)(float),
                          double tolerance, bool relative) {
  const auto N = static_cast<int64_t>(in.size());
  std::string ir_text;
  std::vector<float> out = apply_math_function(name, in, &ir_text);
  ASSERT_EQ(out.size(), in.size()) << ir_text;
  for (int64_t i = 0; i < N; ++i) {
    double want = reference(in[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(out[i])) << name << "(" << in[i] << ") = " << out[i] << " at " << i;
    } else if (std::isinf(want)) {
      ASSERT_EQ(out[i], want) << name << "(" << in[i] << ") at " << i;
    } else {
      double scale = relative ? std::max(1.0, std::abs(want)) : 1.0;
      ASSERT_NEAR(out[i], want, tolerance * scale) << name << "(" << in[i] << ") at " << i << "\n" << ir_text;
    }
  }
}

// 12001 points over [lo, hi] and 7 past hi in the same steps, which fall in the scalar tail.
std::vector<float> spaced(float lo, float hi) {
  std::vector<float> in(12001 + 7);
  for (size_t i = 0; i < in.size(); ++i) in[i] = lo + (hi - lo) * static_cast<float>(i) / 12000.0f;
  return in;
}

// NaN, the infinities and the edges of float's range (e^x overflows past 88.7228, is below FLT_MIN
// under -87.34): once among 16 vector lanes and once more in the scalar tail.
std::vector<float> special_inputs() {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 88.72f, 88.8f, 89.5f, 1e30f,
                                      -87.0f, -88.0f, -100.0f, -1e30f, 0.0f, -0.0f, 20.0f, -20.0f};
  std::vector<float> in = special;
  in.resize(16, 1.0f);
  in.insert(in.end(), special.begin(), special.end());
  return in;
}

// erf, exp, tanh and log are arithmetic in the generated code, in vector and scalar form (GELU's and
// softmax's steps vectorize them; the C library's functions would be a call per lane): erf and
// tanh within 5e-7, exp within 4e-7 of its value, of the C library's, and NaN, +-inf and the ends
// of float's range as it gives them (exp's results below 2^-125 within 4e-7 absolute: flushed to 0).
TEST(EndToEnd, VectorizedErfMatchesTheCLibrary) {
  expect_math_function("erf", spaced(-6, 6), std::erf, 5e-7, false);
  expect_math_function("erf", special_inputs(), std::erf, 5e-7, false);
}

TEST(EndToEnd, VectorizedExpMatchesTheCLibrary) {
  expect_math_function("exp", spaced(-80, 80), std::exp, 4e-7, true);
  expect_math_function("exp", spaced(-1, 1), std::exp, 4e-7, true);
  expect_math_function("exp", spaced(85, 88.72f), std::exp, 4e-7, true);
  expect_math_function("exp", special_inputs(), std::exp, 4e-7, true);
}

// exp relative to its own value (softmax's and GELU's need ~1e-6): within 4e-7 (1.7e-7 measured with
// FMA; without it each step rounds once more) of the double-precision value wherever that is at
// least 2^-125, over the whole range, finely around 0 and over the range of softmax's shifted
// arguments; exactly 1 at 0, +inf past 88.73 and at +inf, NaN at NaN, 0 at -inf and far below, and
// at most 2^-125 where the value is smaller (flushed to 0 there).
TEST(EndToEnd, VectorizedExpIsAccurateRelativeToItsValue) {
  std::vector<float> in;
  for (auto [lo, hi] : {std::pair{-86.9f, 88.72f}, {-1.f, 1.f}, {-20.f, 0.f}, {-100.f, -80.f}, {85.f, 100.f}}) {
    std::vector<float> part = spaced(lo, hi);
    in.insert(in.end(), part.begin(), part.end());
  }
  std::vector<float> special = special_inputs();
  in.insert(in.end(), special.begin(), special.end());
  for (float v : {-1e-30f, 1e-30f, -std::numeric_limits<float>::max(), std::numeric_limits<float>::max(), 88.73f, -87.5f})
    in.push_back(v);
  std::string ir_text;
  std::vector<float> out = apply_math_function("exp", in, &ir_text);
  ASSERT_EQ(out.size(), in.size()) << ir_text;
  const double smallest = std::ldexp(1.0, -125);
  for (size_t i = 0; i < in.size(); ++i) {
    double want = std::exp(static_cast<double>(in[i]));
    if (std::isnan(in[i])) {
      EXPECT_TRUE(std::isnan(out[i])) << "exp(NaN) = " << out[i];
    } else if (want > std::numeric_limits<float>::max()) {
      EXPECT_EQ(out[i], std::numeric_limits<float>::infinity()) << "exp(" << in[i] << ")";
    } else if (want < smallest) {
      EXPECT_GE(out[i], 0.0f) << "exp(" << in[i] << ")";
      EXPECT_LE(out[i], smallest) << "exp(" << in[i] << ")";
      if (in[i] < -88.f) {
        EXPECT_EQ(out[i], 0.0f) << "exp(" << in[i] << ")";
      }
    } else {
      ASSERT_LE(std::abs(out[i] - want) / want, 4e-7) << "exp(" << in[i] << ") = " << out[i] << ", not " << want << " (" << i << ")";
    }
  }
  EXPECT_EQ(out[std::find(in.begin(), in.end(), 0.0f) - in.begin()], 1.0f);
}

// ln over float's whole range (subnormals among it), finely around 1, and at the special inputs:
// within 4e-7 of the C library's value (relative past 1 in magnitude), -inf at zero, NaN below it.
TEST(EndToEnd, VectorizedLogMatchesTheCLibrary) {
  float (*log_of)(float) = [](float v) { return std::log(v); };
  expect_math_function("log", spaced(1e-3f, 100.0f), log_of, 4e-7, true);
  expect_math_function("log", spaced(0.5f, 2.0f), log_of, 4e-7, true);
  std::vector<float> tiny;
  for (float v = 1e-45f; v < 1e38f; v *= 3.7f) tiny.push_back(v);
  expect_math_function("log", tiny, log_of, 4e-7, true);
  expect_math_function("log", special_inputs(), log_of, 4e-7, true);
}

TEST(EndToEnd, VectorizedTanhMatchesTheCLibrary) {
  expect_math_function("tanh", spaced(-10, 10), std::tanh, 5e-7, false);
  expect_math_function("tanh", spaced(-0.5f, 0.5f), std::tanh, 5e-7, false);
  expect_math_function("tanh", special_inputs(), std::tanh, 5e-7, false);
}

// sin and cos within 2e-7 absolute over a few turns, and over the angles of a rotary embedding of
// 100k positions (the reduction to [-pi/4, pi/4] in double: in float32 it loses bits past ~8000);
// NaN past 2^50 (1e30 among the special inputs), where no reduction here finds the phase.
float sine_below_2_50(float v, bool cosine) {
  if (std::abs(v) >= 0x1p50f) return std::numeric_limits<float>::quiet_NaN();
  return static_cast<float>(cosine ? std::cos(static_cast<double>(v)) : std::sin(static_cast<double>(v)));
}

TEST(EndToEnd, VectorizedSinAndCosMatchTheCLibrary) {
  float (*sin_of)(float) = [](float v) { return sine_below_2_50(v, false); };
  float (*cos_of)(float) = [](float v) { return sine_below_2_50(v, true); };
  for (auto [name, f] : {std::pair{"sin", sin_of}, {"cos", cos_of}}) {
    expect_math_function(name, spaced(-20, 20), f, 2e-7, false);
    expect_math_function(name, spaced(-1e-3f, 1e-3f), f, 2e-7, false);
    expect_math_function(name, spaced(9e4f, 1e5f), f, 2e-7, false);
    expect_math_function(name, special_inputs(), f, 2e-7, false);
  }
}

}  // namespace
}  // namespace tunefarm
