#include "model/onnx_shape_folding.h"

#include <map>
#include <vector>

#include <fmt/format.h>

#include "model/onnx_tensor.h"

namespace tunefarm::model {
namespace {

struct IntTensor {
  std::vector<int64_t> dims;
  std::vector<int64_t> data;
};

bool read_ints(const onnx::TensorProto& t, IntTensor& out) {
  if (t.data_type() != onnx::TensorProto::INT64 && t.data_type() != onnx::TensorProto::INT32) return false;
  // Shape computations are short; large integer tensors are data, and are not copied here.
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (n *= d) > 64) return false;
  }
  Value v;
  if (!read_tensor(t, v).ok()) return false;
  out = {std::move(v.shape), std::move(v.ints)};
  return true;
}

int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return fallback;
}

std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return {a.ints().begin(), a.ints().end()};
  return {};
}

// The value of a folded node, or nothing when its inputs are not all known.
std::optional<IntTensor> evaluate(const onnx::NodeProto& n, const std::map<std::string, IntTensor>& known,
                                  const std::map<std::string, std::vector<int64_t>>& shapes) {
  auto in = [&](int i) -> const IntTensor* {
    if (i >= n.input_size()) return nullptr;
    auto it = known.find(n.input(i));
    return it == known.end() ? nullptr : &it->second;
  };
  const std::string& op = n.op_type();
  if (op == "Shape") {
    auto it = shapes.find(n.input(0));
    if (it == shapes.end() || n.attribute_size() > 0) return std::nullopt;
    return IntTensor{{static_cast<int64_t>(it->second.size())}, it->second};
  }
  if (op == "Gather") {
    const IntTensor *data = in(0), *index = in(1);
    if (!data || !index || data->dims.size() != 1 || attr_int(n, "axis", 0) != 0) return std::nullopt;
    IntTensor out{index->dims, {}};
    for (int64_t i : index->data) {
      if (i < 0) i += static_cast<int64_t>(data->data.size());
      if (i < 0 || i >= static_cast<int64_t>(data->data.size())) return std::nullopt;
      out.data.push_back(data->data[i]);
    }
    return out;
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    const IntTensor* data = in(0);
    if (!data) return std::nullopt;
    // The data is unchanged; only its rank changes, and shape computations use rank 0 and 1.
    int64_t n_elems = static_cast<int64_t>(data->data.size());
    if (op == "Unsqueeze" && data->dims.empty()) return IntTensor{{1}, data->data};
    if (op == "Squeeze" && n_elems == 1) return IntTensor{{}, data->data};
    return std::nullopt;
  }
  if (op == "Concat") {
    if (attr_int(n, "axis", 0) != 0) return std::nullopt;
    IntTensor out{{0}, {}};
    for (int i = 0; i < n.input_size(); ++i) {
      const IntTensor* part = in(i);
      if (!part || part->dims.size() != 1) return std::nullopt;
      out.data.insert(out.data.end(), part->data.begin(), part->data.end());
    }
    out.dims = {static_cast<int64_t>(out.data.size())};
    return out;
  }
  if (op == "Cast") {
    const IntTensor* data = in(0);
    int64_t to = attr_int(n, "to", 0);
    if (!data || (to != onnx::TensorProto::INT64 && to != onnx::TensorProto::INT32)) return std::nullopt;
    return *data;
  }
  (void)attr_ints;
  return std::nullopt;
}

}  // namespace

StatusOr<int> fold_shape_computations(onnx::GraphProto& graph) {
  std::map<std::string, IntTensor> known;
  for (const auto& t : graph.initializer()) {
    IntTensor v;
    if (read_ints(t, v)) known[t.name()] = std::move(v);
  }
  std::map<std::string, std::vector<int64_t>> shapes;
  auto note_shape = [&](const onnx::ValueInfoProto& info) {
    if (!info.type().has_tensor_type() || !info.type().tensor_type().has_shape()) return;
    std::vector<int64_t> dims;
    for (const auto& d : info.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value()) return;
      dims.push_back(d.dim_value());
    }
    shapes[info.name()] = std::move(dims);
  };
  for (const auto& v : graph.input()) note_shape(v);
  for (const auto& v : graph.value_info()) note_shape(v);
  int folded = 0;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (auto& node : *graph.mutable_node()) {
    std::optional<IntTensor> value;
    if (node.op_type() == "Constant") {
      for (const auto& a : node.attribute()) {
        IntTensor v;
        if (a.name() == "value" && read_ints(a.t(), v)) known[node.output(0)] = std::move(v);
      }
    } else if (node.output_size() == 1) {
      value = evaluate(node, known, shapes);
    }
    if (!value) {
      *kept.Add() = std::move(node);
      continue;
    }
    auto* t = graph.add_initializer();
    t->set_name(node.output(0));
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : value->dims) t->add_dims(d);
    for (int64_t x : value->data) t->add_int64_data(x);
    known[node.output(0)] = std::move(*value);
    ++folded;
  }
  graph.mutable_node()->Swap(&kept);
  // Values that became initializers are no longer computed: their inferred infos would now
  // contradict nothing, but inference adds them again; drop them so that it starts clean.
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> infos;
  for (auto& v : *graph.mutable_value_info())
    if (!known.count(v.name())) *infos.Add() = std::move(v);
  graph.mutable_value_info()->Swap(&infos);
  return folded;
}

}  // namespace tunefarm::model
