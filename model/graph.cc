#include "model/graph.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace tunefarm::model {

int64_t Value::elements() const {
  // Shapes come from files anyone may upload: a product past int64 saturates, so that every
  // limit it is checked against refuses it.
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  return n;
}

int64_t Node::int_attr(const std::string& key, int64_t fallback) const {
  auto it = attributes.find(key);
  return it == attributes.end() ? fallback : it->second.i;
}

std::vector<int64_t> Node::ints_attr(const std::string& key) const {
  auto it = attributes.find(key);
  return it == attributes.end() ? std::vector<int64_t>{} : it->second.ints;
}

float Node::float_attr(const std::string& key, float fallback) const {
  auto it = attributes.find(key);
  return it == attributes.end() ? fallback : it->second.f;
}

const Value* Graph::find(const std::string& name) const {
  auto it = values.find(name);
  return it == values.end() ? nullptr : &it->second;
}

Value* Graph::find(const std::string& name) {
  auto it = values.find(name);
  return it == values.end() ? nullptr : &it->second;
}

StatusOr<const Value*> Graph::value_of(const Node& node, const std::string& name) const {
  const Value* v = find(name);
  if (!v) return invalid_argument(fmt::format("node '{}' ({}): input '{}' has no known shape", node.name, node.op, name));
  return v;
}

void absorb(Node& node, const Node& folded) {
  if (node.sources.empty()) node.sources.push_back(node.name);
  if (folded.sources.empty()) node.sources.push_back(folded.name);
  node.sources.insert(node.sources.end(), folded.sources.begin(), folded.sources.end());
}

std::vector<int64_t> transpose_perm(const Node& transpose, size_t rank) {
  std::vector<int64_t> perm = transpose.ints_attr("perm");
  if (perm.empty())
    for (size_t d = 0; d < rank; ++d) perm.push_back(static_cast<int64_t>(rank - 1 - d));
  return perm;
}

bool is_permutation(const std::vector<int64_t>& p) {
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (size_t d = 0; d < sorted.size(); ++d)
    if (sorted[d] != static_cast<int64_t>(d)) return false;
  return true;
}

int Graph::readers(const std::string& name) const {
  int n = static_cast<int>(std::count(outputs.begin(), outputs.end(), name));
  for (const Node& node : nodes) n += static_cast<int>(std::count(node.inputs.begin(), node.inputs.end(), name));
  return n;
}

int Graph::only_reader(const std::string& name) const {
  if (readers(name) != 1) return -1;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (std::count(nodes[i].inputs.begin(), nodes[i].inputs.end(), name)) return static_cast<int>(i);
  return -1;  // A graph output.
}

int Graph::producer(const std::string& name) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (std::count(nodes[i].outputs.begin(), nodes[i].outputs.end(), name)) return static_cast<int>(i);
  return -1;
}

bool Graph::scalar(const std::string& name, float& out) const {
  const Value* v = find(name);
  if (!v || !v->constant || !v->is_float || v->floats.size() != 1) return false;
  out = v->floats[0];
  return true;
}

std::string shape_string(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string Graph::add_int_constant(const std::string& name, std::vector<int64_t> ints) {
  Value v;
  v.name = name;
  v.constant = true;
  v.is_float = false;
  v.shape = {static_cast<int64_t>(ints.size())};
  v.ints = std::move(ints);
  values[name] = std::move(v);
  return name;
}

}  // namespace tunefarm::model
