#include "measure/tensors.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "common/workload.h"

namespace tunefarm {
namespace {

int element_bytes(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32: case v1::INT32: return 4;
    case v1::FLOAT64: return 8;
    case v1::FLOAT16: return 2;
    case v1::INT8: case v1::UINT8: return 1;
    default: return 0;
  }
}

uint16_t float_to_half(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = bits & 0x7fffffu;
  if (exponent <= 0) return static_cast<uint16_t>(sign);  // Inputs are in [-1, 1): flush tiny values.
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13));
}

float half_to_float(uint16_t half) {
  uint32_t sign = (half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  float magnitude;
  if (exponent == 0) magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  else if (exponent == 31) magnitude = mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  return sign ? -magnitude : magnitude;
}

double element_at(const HostTensor& t, const std::byte* base, int64_t i) {
  switch (t.arg.dtype()) {
    case v1::FLOAT32: { float v; std::memcpy(&v, base + 4 * i, 4); return v; }
    case v1::FLOAT64: { double v; std::memcpy(&v, base + 8 * i, 8); return v; }
    case v1::FLOAT16: { uint16_t v; std::memcpy(&v, base + 2 * i, 2); return half_to_float(v); }
    case v1::INT32: { int32_t v; std::memcpy(&v, base + 4 * i, 4); return v; }
    case v1::INT8: return static_cast<int8_t>(base[i]);
    case v1::UINT8: return static_cast<uint8_t>(base[i]);
    default: return 0;
  }
}

}  // namespace

StatusOr<std::vector<HostTensor>> allocate_tensors(const google::protobuf::RepeatedPtrField<v1::TensorArg>& args) {
  if (args.empty()) return invalid_argument("the artifact declares no tensor arguments");
  std::vector<HostTensor> tensors;
  int64_t total = 0;
  for (const auto& arg : args) {
    int width = element_bytes(arg.dtype());
    if (width == 0) return invalid_argument(fmt::format("argument '{}' has no known dtype", arg.name()));
    if (arg.shape().empty()) return invalid_argument(fmt::format("argument '{}' has no shape", arg.name()));
    int64_t elements = 1;
    for (int64_t dim : arg.shape()) {
      if (dim <= 0 || dim > kMaxDimension)
        return invalid_argument(fmt::format("argument '{}' has dimension {} outside 1..{}", arg.name(), dim, kMaxDimension));
      elements *= dim;
      if (elements > kMaxTensorElements)
        return invalid_argument(fmt::format("argument '{}' has more than {} elements", arg.name(), kMaxTensorElements));
    }
    total += elements * width;
    if (total > kMaxArgumentBytes)
      return resource_exhausted(fmt::format("the arguments need more than {} bytes", kMaxArgumentBytes));
    HostTensor tensor;
    tensor.arg = arg;
    tensor.elements = elements;
    tensor.bytes = elements * width;
    // aligned_alloc wants a size that is a multiple of the alignment.
    int64_t rounded = (tensor.bytes + 63) / 64 * 64;
    tensor.data.reset(static_cast<std::byte*>(std::aligned_alloc(64, static_cast<size_t>(rounded))));
    if (!tensor.data) return resource_exhausted(fmt::format("cannot allocate {} bytes for '{}'", rounded, arg.name()));
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

namespace {

// Element i of a stream, as a 64-bit hash of (stream, i) (splitmix64's finaliser): each element is
// computed on its own, so the loops below vectorize, where a sequential generator (mt19937_64 with a
// distribution) took 0.38 s for a 4096x4096 GEMM's two inputs, in every worker, candidate after
// candidate.
inline uint64_t element_hash(uint64_t stream, uint64_t i) {
  uint64_t z = stream + (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1): the hash's top 24 bits, as many as a float's mantissa holds.
inline float unit_real(uint64_t h) { return static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f; }

// Uniform in [-4, 4].
inline int small_int(uint64_t h) { return static_cast<int>((h >> 32) % 9) - 4; }

template <typename T, typename Make>
void fill(std::byte* base, int64_t elements, uint64_t stream, Make make) {
  T* out = reinterpret_cast<T*>(base);
  for (int64_t i = 0; i < elements; ++i) out[i] = make(element_hash(stream, static_cast<uint64_t>(i)));
}

}  // namespace

void fill_tensors(std::vector<HostTensor>& tensors, uint64_t seed) {
  for (size_t index = 0; index < tensors.size(); ++index) {
    HostTensor& t = tensors[index];
    std::byte* base = t.data.get();
    if (t.arg.is_output()) {
      std::memset(base, 0, static_cast<size_t>(t.bytes));
      continue;
    }
    // One stream per argument, so that adding an argument does not shift the others' values.
    uint64_t stream = element_hash(seed, index);
    switch (t.arg.dtype()) {
      case v1::FLOAT32: fill<float>(base, t.elements, stream, unit_real); break;
      case v1::FLOAT64: fill<double>(base, t.elements, stream, [](uint64_t h) { return double{unit_real(h)}; }); break;
      case v1::FLOAT16: fill<uint16_t>(base, t.elements, stream, [](uint64_t h) { return float_to_half(unit_real(h)); }); break;
      case v1::INT32: fill<int32_t>(base, t.elements, stream, small_int); break;
      case v1::INT8: fill<int8_t>(base, t.elements, stream, [](uint64_t h) { return static_cast<int8_t>(small_int(h)); }); break;
      case v1::UINT8: fill<uint8_t>(base, t.elements, stream, [](uint64_t h) { return static_cast<uint8_t>(small_int(h) + 4); }); break;
      default: break;
    }
  }
}

std::vector<std::string> output_bytes(const std::vector<HostTensor>& tensors) {
  std::vector<std::string> out;
  for (const auto& t : tensors)
    if (t.arg.is_output()) out.emplace_back(reinterpret_cast<const char*>(t.data.get()), static_cast<size_t>(t.bytes));
  return out;
}

Status compare_output_bytes(const google::protobuf::RepeatedPtrField<v1::TensorArg>& args,
                            const std::vector<std::string>& actual, const std::vector<std::string>& expected,
                            const Tolerance& tolerance) {
  size_t output = 0;
  for (const auto& arg : args) {
    if (!arg.is_output()) continue;
    int width = element_bytes(arg.dtype());
    if (output >= actual.size() || output >= expected.size() || width == 0 ||
        actual[output].size() != expected[output].size())
      return invalid_argument(fmt::format("output '{}' does not match the reference's outputs in size", arg.name()));
    HostTensor t;
    t.arg = arg;
    t.elements = static_cast<int64_t>(actual[output].size()) / width;
    const auto* got_base = reinterpret_cast<const std::byte*>(actual[output].data());
    const auto* want = reinterpret_cast<const std::byte*>(expected[output].data());
    int64_t differing = 0;
    std::string first;
    for (int64_t i = 0; i < t.elements; ++i) {
      double got = element_at(t, got_base, i);
      double ref = element_at(t, want, i);
      if (!within_tolerance(got, ref, tolerance)) {
        if (differing++ == 0) first = fmt::format("{}[{}] is {} but the reference has {}", arg.name(), i, got, ref);
      }
    }
    if (differing)
      return invalid_argument(fmt::format("{} ({} of {} elements of '{}' differ; rtol {}, atol {})", first, differing,
                                          t.elements, arg.name(), tolerance.rtol, tolerance.atol));
    ++output;
  }
  if (output != actual.size()) return invalid_argument("the kernel gave more outputs than it declares");
  return Status();
}

Status compare_outputs(const std::vector<HostTensor>& tensors, const std::vector<std::string>& expected,
                       const Tolerance& tolerance) {
  google::protobuf::RepeatedPtrField<v1::TensorArg> args;
  for (const auto& t : tensors) *args.Add() = t.arg;
  return compare_output_bytes(args, output_bytes(tensors), expected, tolerance);
}

}  // namespace tunefarm
