// The pieces every operator description is made of: its parameters' specifications and its
// kernel's tensor arguments (common/operators/operator.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/workload.h"

namespace tunefarm::operators {

struct ParamSpec {
  const char* name;
  bool required;
  int64_t default_value;  // Used when not required and absent.
  int64_t min_value;
  int64_t max_value;
  bool print_default;     // Printed in the canonical form even when equal to its default.
};

// A dimension: required, 1..kMaxDimension, always printed.
inline ParamSpec dim(const char* name) { return {name, true, 0, 1, kMaxDimension, true}; }
// A 0/1 switch: optional, off by default, printed only when on.
inline ParamSpec flag(const char* name) { return {name, false, 0, 0, 1, false}; }

// One tensor argument of a kernel: inputs first, the output last.
struct TensorArg {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  bool is_output = false;
  // How the dimensions are named, for people reading a library's header ("NCHW", "OIHW"); empty
  // for a plain row-major matrix.
  std::string layout;
  // Fixed when a model is built (weights, biases): between two runs of a step, a model run passes
  // its other steps' data through the caches, while the other inputs were just written by the
  // step before (measure/cpu_runner.cc times candidates so).
  bool constant = false;

  // A float32 input without a named layout: what most arguments are.
  static TensorArg input(std::string name, std::vector<int64_t> shape) {
    return {std::move(name), std::move(shape), DType::kFloat32, false, ""};
  }

  static TensorArg weight(std::string name, std::vector<int64_t> shape, std::string layout = "") {
    return {std::move(name), std::move(shape), DType::kFloat32, false, std::move(layout), true};
  }

  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

}  // namespace tunefarm::operators
