// The graph IR of an imported model: values (tensors with a static shape, and the data of those
// that are constant), and nodes in topological order that read and write values by name. It keeps
// what the passes and the task extraction need, in our own types: nothing past the importer sees
// ONNX's protobuf.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace tunefarm::model {

struct Value {
  std::string name;
  std::vector<int64_t> shape;  // Static; a scalar has none.
  bool is_float = true;        // Float32, or an integer type (shapes, indices).
  // A model input's element type as the caller passes it: "float32", "int64" or "int32" (token
  // ids, masks); another name for a type a built model does not take.
  std::string dtype = "float32";
  // Constant data (initializers, Constant nodes, folded values); empty for computed values.
  bool constant = false;
  std::vector<float> floats;
  std::vector<int64_t> ints;

  // The product of the shape; INT64_MAX where it does not fit.
  int64_t elements() const;
};

struct Attribute {
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;  // A recurrent operator's activations.
};

// An elementwise operation folded into the operator before it, applied to its output in order.
struct Epilogue {
  std::string op;       // "bias" (per output channel / column), "add" (a same-shaped tensor), "relu", "clip",
                        // "silu" (x * sigmoid(x)), "hardswish" (x * clamp(x / 6 + 1/2, 0, 1)).
  std::string operand;  // The value added, for "bias" and "add".
  float lo = 0, hi = 0; // The bounds of "clip" (ReLU6 is 0..6).
};

struct Node {
  std::string name;                  // As in the file, or "<op>_<index>" when it had none.
  std::string op;                    // ONNX operator type ("Conv", "MatMul", ...).
  std::vector<std::string> inputs;   // Value names; "" for an omitted optional input.
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attributes;
  std::vector<Epilogue> epilogue;    // What the passes folded into this operator.
  // Nodes of the file this one now stands for (itself, a BatchNormalization folded into it, ...).
  std::vector<std::string> sources;

  int64_t int_attr(const std::string& key, int64_t fallback) const;
  std::vector<int64_t> ints_attr(const std::string& key) const;
  float float_attr(const std::string& key, float fallback) const;
};

// `node` now stands for `folded` too (a pass folded it in): the file's nodes it stands for, for
// the build's step names and profiles.
void absorb(Node& node, const Node& folded);

// A Transpose node's permutation of `rank` axes (reversed where it has no "perm"), and whether a
// list is a permutation of 0..n-1.
std::vector<int64_t> transpose_perm(const Node& transpose, size_t rank);
bool is_permutation(const std::vector<int64_t>& p);

class Graph {
 public:
  std::vector<std::string> inputs;   // Values fed at run time.
  std::vector<std::string> outputs;
  std::vector<Node> nodes;           // Topological order.
  std::map<std::string, Value> values;

  const Value* find(const std::string& name) const;
  Value* find(const std::string& name);
  // The value named `name`, or an error naming the node that needed it.
  StatusOr<const Value*> value_of(const Node& node, const std::string& name) const;
  // How many nodes read `name` (graph outputs count as readers).
  int readers(const std::string& name) const;
  // The index of the one node that reads `name`, or -1 when there are none or several.
  int only_reader(const std::string& name) const;
  // The index of the node that writes `name`, or -1 (an input, a constant).
  int producer(const std::string& name) const;
  // The single float of constant `name`, if it is one (a scale, an epsilon, an exponent).
  bool scalar(const std::string& name, float& out) const;
  // Adds a constant 1-D int64 value (a Slice's starts, a Pad's pads); answers its name.
  std::string add_int_constant(const std::string& name, std::vector<int64_t> ints);
};

// "[1, 3, 224, 224]".
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace tunefarm::model
