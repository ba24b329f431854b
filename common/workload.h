// Workloads: one operator instance with its shapes, and its canonical text form
// ("matmul:M=512,N=512,K=512"; the operators are described in common/operators/). Every program parses workload strings
// through this one parser, so a string that one accepts all accept, with the same errors.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tunefarm {

enum class DType { kFloat32, kFloat16, kFloat64, kInt8, kInt32, kUInt8 };

std::string_view dtype_name(DType dtype);
StatusOr<DType> parse_dtype(std::string_view name);
int dtype_bytes(DType dtype);

// Largest value of any single dimension, and of any tensor's element count, that a workload may
// ask for. Far above any real layer, low enough that sizes cannot overflow and buffers fit.
inline constexpr int64_t kMaxDimension = int64_t{1} << 20;
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 30;

struct Workload {
  std::string op;
  // Every parameter of the operator, in its canonical order, defaults filled in.
  std::vector<std::pair<std::string, int64_t>> params;
  DType dtype = DType::kFloat32;

  // The value of a parameter; the operator's schema guarantees it exists after parsing.
  int64_t param(std::string_view name) const;
  bool has_param(std::string_view name) const;

  // Canonical string: parameters in schema order, optional ones only when they differ from their
  // default (unless the schema always prints them), dtype only when not float32.
  std::string to_string() const;

  bool operator==(const Workload& other) const = default;
};

// Parses and validates a workload string: known operator, every required parameter present, no
// unknown or repeated parameter, values in range, and shapes that make sense (a convolution's
// output is not empty). Errors name the offending part.
StatusOr<Workload> parse_workload(std::string_view text);

// Validates a workload built in code (e.g. decoded from the wire) with the same rules.
Status validate_workload(const Workload& workload);

// Reads a workload file: one workload string per line, '#' starts a comment, blank lines skipped.
// Errors carry the file name and line number.
StatusOr<std::vector<Workload>> read_workload_file(const std::string& path);

// How many products each output element sums (K of a GEMM, C*R*S of a convolution, R*S of a
// depthwise one, C*alpha^4 of a Winograd one, its transforms written out): what the correctness
// check scales its tolerance by. Border elements of a padded convolution sum fewer; this is the
// most any element sums.
int64_t reduction_length(const Workload& workload);

// Names of the operators the parser knows, sorted.
std::vector<std::string> known_ops();

}  // namespace tunefarm
