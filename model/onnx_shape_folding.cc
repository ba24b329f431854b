#include "model/onnx_shape_folding.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "model/onnx_tensor.h"

namespace tunefarm::model {
namespace {

struct IntTensor {
  std::vector<int64_t> dims;
  std::vector<int64_t> data;
  int type = onnx::TensorProto::INT64;  // INT64, INT32 or BOOL.
};

// A float computed from constants alone on its way to a shape: the TorchScript exporter's
// MobileViT takes a patch count as int(ceil(16.0) * 2.0) / 2.
struct RealTensor {
  std::vector<int64_t> dims;
  std::vector<double> data;
};

bool read_reals(const onnx::TensorProto& t, RealTensor& out) {
  if (t.data_type() != onnx::TensorProto::FLOAT) return false;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (n *= d) > 64) return false;
  }
  Value v;
  if (!read_tensor(t, v).ok() || !v.is_float) return false;
  out = {std::move(v.shape), std::vector<double>(v.floats.begin(), v.floats.end())};
  return true;
}

bool read_ints(const onnx::TensorProto& t, IntTensor& out) {
  if (t.data_type() != onnx::TensorProto::INT64 && t.data_type() != onnx::TensorProto::INT32 &&
      t.data_type() != onnx::TensorProto::BOOL)
    return false;
  // Shape computations are short; large integer tensors are data, and are not copied here.
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (n *= d) > 64) return false;
  }
  Value v;
  if (!read_tensor(t, v).ok()) return false;
  out = {std::move(v.shape), std::move(v.ints), t.data_type()};
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

// Input `i` of `n` among `values`, or nullptr when it has none there.
template <typename T>
const T* input_of(const onnx::NodeProto& n, const std::map<std::string, T>& values, int i) {
  if (i >= n.input_size()) return nullptr;
  auto it = values.find(n.input(i));
  return it == values.end() ? nullptr : &it->second;
}

// The value of a float node of known float inputs, or nothing.
std::optional<RealTensor> evaluate_real(const onnx::NodeProto& n, const std::map<std::string, RealTensor>& reals,
                                        const std::map<std::string, IntTensor>& known) {
  auto in = [&](int i) { return input_of(n, reals, i); };
  const std::string& op = n.op_type();
  if (op == "Cast") {
    int64_t to = attr_int(n, "to", 0);
    auto it = known.find(n.input(0));
    if (to != onnx::TensorProto::FLOAT || it == known.end()) return std::nullopt;
    return RealTensor{it->second.dims, std::vector<double>(it->second.data.begin(), it->second.data.end())};
  }
  if (op == "Ceil" || op == "Floor" || op == "Neg" || op == "Sqrt") {
    const RealTensor* x = in(0);
    if (!x) return std::nullopt;
    RealTensor out = *x;
    for (double& v : out.data) v = op == "Ceil" ? std::ceil(v) : op == "Floor" ? std::floor(v) : op == "Sqrt" ? std::sqrt(v) : -v;
    return out;
  }
  // Pow: DINOv2's side of the patch grid, the square root of its patch count (256 ** 0.5).
  static const std::set<std::string> kBinary = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
  if (!kBinary.count(op)) return std::nullopt;
  const RealTensor *a = in(0), *b = in(1);
  if (!a || !b || (a->data.size() != b->data.size() && a->data.size() != 1 && b->data.size() != 1)) return std::nullopt;
  RealTensor out = a->data.size() >= b->data.size() ? *a : *b;
  for (size_t i = 0; i < out.data.size(); ++i) {
    double x = a->data[a->data.size() == 1 ? 0 : i], y = b->data[b->data.size() == 1 ? 0 : i];
    out.data[i] = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : op == "Div" ? x / y
                : op == "Max" ? std::max(x, y) : op == "Pow" ? std::pow(x, y) : std::min(x, y);
  }
  return out;
}

// The value of a folded node, or nothing when its inputs are not all known.
std::optional<IntTensor> evaluate(const onnx::NodeProto& n, const std::map<std::string, IntTensor>& known,
                                  const std::map<std::string, RealTensor>& reals,
                                  const std::map<std::string, std::vector<int64_t>>& shapes) {
  auto in = [&](int i) { return input_of(n, known, i); };
  const std::string& op = n.op_type();
  if (op == "Shape") {
    // From opset 15, the dimensions [start, end) only (the dynamo exporter's size of one axis).
    auto it = shapes.find(n.input(0));
    if (it == shapes.end()) return std::nullopt;
    auto rank = static_cast<int64_t>(it->second.size());
    auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
    int64_t start = clamp(attr_int(n, "start", 0)), end = clamp(attr_int(n, "end", rank));
    std::vector<int64_t> dims(it->second.begin() + start, it->second.begin() + std::max(start, end));
    return IntTensor{{static_cast<int64_t>(dims.size())}, dims};
  }
  if (op == "Size") {
    auto it = shapes.find(n.input(0));
    if (it == shapes.end()) return std::nullopt;
    int64_t count = 1;
    for (int64_t d : it->second) count *= d;
    return IntTensor{{}, {count}};
  }
  if (op == "Gather") {
    const IntTensor *data = in(0), *index = in(1);
    if (!data || !index || data->dims.size() != 1 || attr_int(n, "axis", 0) != 0) return std::nullopt;
    IntTensor out{index->dims, {}, data->type};
    for (int64_t i : index->data) {
      if (i < 0) i += static_cast<int64_t>(data->data.size());
      if (i < 0 || i >= static_cast<int64_t>(data->data.size())) return std::nullopt;
      out.data.push_back(data->data[i]);
    }
    return out;
  }
  // The TorchScript exporter passes a shared shape through Identity (Swin V2's [96] of a bias).
  if (op == "Identity") {
    const IntTensor* data = in(0);
    return data ? std::optional<IntTensor>(*data) : std::nullopt;
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
    if (to != onnx::TensorProto::INT64 && to != onnx::TensorProto::INT32 && to != onnx::TensorProto::BOOL) return std::nullopt;
    // A float truncates toward zero, as ONNX Runtime casts it.
    auto real = reals.find(n.input(0));
    if (!data && real != reals.end()) {
      IntTensor out{real->second.dims, {}, static_cast<int>(to)};
      for (double v : real->second.data) {
        if (!std::isfinite(v) || std::abs(v) > 9e15) return std::nullopt;
        out.data.push_back(to == onnx::TensorProto::BOOL ? v != 0 : static_cast<int64_t>(std::trunc(v)));
      }
      return out;
    }
    if (!data) return std::nullopt;
    IntTensor out = *data;
    out.type = static_cast<int>(to);
    if (to == onnx::TensorProto::BOOL)
      for (int64_t& x : out.data) x = x != 0;
    return out;
  }
  // Arithmetic and comparisons of the dimensions (ShuffleNet's chunk sizes: Shape -> Gather ->
  // Div -> Mul -> Slice), elementwise with a scalar broadcast.
  static const std::set<std::string> kBinary = {"Add", "Sub", "Mul", "Div", "Mod", "Equal", "Less", "Greater", "Max", "Min"};
  if (kBinary.count(op)) {
    const IntTensor *a = in(0), *b = in(1);
    if (!a || !b) return std::nullopt;
    if (a->data.size() != b->data.size() && a->data.size() != 1 && b->data.size() != 1) return std::nullopt;
    IntTensor out = a->data.size() >= b->data.size() ? *a : *b;
    bool compare = op == "Equal" || op == "Less" || op == "Greater";
    if (compare) out.type = onnx::TensorProto::BOOL;
    for (size_t i = 0; i < out.data.size(); ++i) {
      int64_t x = a->data[a->data.size() == 1 ? 0 : i], y = b->data[b->data.size() == 1 ? 0 : i];
      if ((op == "Div" || op == "Mod") && y == 0) return std::nullopt;
      // Mod of integers takes the divisor's sign (fmod=0), as Python's %.
      if (op == "Mod") {
        out.data[i] = attr_int(n, "fmod", 0) ? x % y : ((x % y) + y) % y;
        continue;
      }
      out.data[i] = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : op == "Div" ? x / y
                  : op == "Equal" ? x == y : op == "Less" ? x < y : op == "Greater" ? x > y
                  : op == "Max" ? std::max(x, y) : std::min(x, y);
    }
    return out;
  }
  if (op == "Where") {
    const IntTensor *c = in(0), *a = in(1), *b = in(2);
    if (!c || !a || !b) return std::nullopt;
    size_t size = std::max({c->data.size(), a->data.size(), b->data.size()});
    for (const IntTensor* t : {c, a, b})
      if (t->data.size() != size && t->data.size() != 1) return std::nullopt;
    IntTensor out = a->data.size() == size ? *a : *b;
    out.type = a->type;
    out.data.resize(size);
    for (size_t i = 0; i < size; ++i) {
      auto at = [&](const IntTensor* t) { return t->data[t->data.size() == 1 ? 0 : i]; };
      out.data[i] = at(c) ? at(a) : at(b);
    }
    if (c->data.size() == size) out.dims = c->dims;
    return out;
  }
  if (op == "Reshape") {
    const IntTensor *data = in(0), *shape = in(1);
    if (!data || !shape) return std::nullopt;
    IntTensor out = *data;
    out.dims = shape->data;
    int64_t known = 1, unknown = -1;
    for (size_t d = 0; d < out.dims.size(); ++d) {
      if (out.dims[d] == 0 && d < data->dims.size()) out.dims[d] = data->dims[d];
      if (out.dims[d] == -1) unknown = static_cast<int64_t>(d);
      else known *= out.dims[d];
    }
    if (unknown >= 0 && known > 0) out.dims[static_cast<size_t>(unknown)] = static_cast<int64_t>(data->data.size()) / known;
    int64_t count = 1;
    for (int64_t d : out.dims) count *= d;
    if (count != static_cast<int64_t>(data->data.size())) return std::nullopt;
    return out;
  }
  if (op == "ConstantOfShape") {
    // An integer fill (the -1 placeholders of Expand's shape the TorchScript exporter builds).
    const IntTensor* shape = in(0);
    IntTensor fill;
    const onnx::AttributeProto* value = nullptr;
    for (const auto& a : n.attribute())
      if (a.name() == "value") value = &a;
    if (!shape || !value || !read_ints(value->t(), fill) || fill.data.size() != 1) return std::nullopt;
    int64_t count = 1;
    for (int64_t d : shape->data)
      if (d < 0 || (count *= d) > 64) return std::nullopt;
    return IntTensor{shape->data, std::vector<int64_t>(static_cast<size_t>(count), fill.data[0]), fill.type};
  }
  if (op == "Slice") {
    // Any axes and steps, as ONNX clamps them (the TorchScript exporter reverses pads with -1).
    const IntTensor *data = in(0), *starts = in(1), *ends = in(2), *axes = in(3), *steps = in(4);
    if (!data || !starts || !ends || ends->data.size() != starts->data.size() ||
        (n.input_size() > 3 && !n.input(3).empty() && (!axes || axes->data.size() != starts->data.size())) ||
        (n.input_size() > 4 && !n.input(4).empty() && (!steps || steps->data.size() != starts->data.size())))
      return std::nullopt;
    size_t rank = data->dims.size();
    std::vector<int64_t> begin(rank, 0), step(rank, 1), dims = data->dims;
    for (size_t k = 0; k < starts->data.size(); ++k) {
      int64_t a = axes ? axes->data[k] : static_cast<int64_t>(k);
      if (a < 0) a += static_cast<int64_t>(rank);
      if (a < 0 || a >= static_cast<int64_t>(rank)) return std::nullopt;
      int64_t dim = data->dims[static_cast<size_t>(a)], st = steps ? steps->data[k] : 1;
      if (st == 0) return std::nullopt;
      int64_t b = starts->data[k], e = ends->data[k];
      if (b < 0) b += dim;
      if (e < 0) e += dim;
      b = st > 0 ? std::clamp<int64_t>(b, 0, dim) : std::clamp<int64_t>(b, 0, dim - 1);
      e = st > 0 ? std::clamp<int64_t>(e, 0, dim) : std::clamp<int64_t>(e, -1, dim - 1);
      int64_t count = st > 0 ? (e - b + st - 1) / st : (b - e - st - 1) / -st;
      begin[static_cast<size_t>(a)] = b;
      step[static_cast<size_t>(a)] = st;
      dims[static_cast<size_t>(a)] = std::max<int64_t>(0, count);
    }
    IntTensor out{dims, {}, data->type};
    std::vector<int64_t> index(rank, 0);
    int64_t total = 1;
    for (int64_t d : dims) total *= d;
    for (int64_t i = 0; i < total; ++i) {
      int64_t flat = 0;
      for (size_t d = 0; d < rank; ++d) flat = flat * data->dims[d] + begin[d] + index[d] * step[d];
      out.data.push_back(data->data[static_cast<size_t>(flat)]);
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < dims[d]) break;
        index[d] = 0;
      }
    }
    return out;
  }
  if (op == "Transpose") {
    const IntTensor* data = in(0);
    if (!data) return std::nullopt;
    size_t rank = data->dims.size();
    std::vector<int64_t> perm = attr_ints(n, "perm");
    if (perm.empty())
      for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    if (perm.size() != rank) return std::nullopt;
    std::vector<int64_t> dims, strides(rank, 1);
    for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * data->dims[d];
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(rank)) return std::nullopt;
      dims.push_back(data->dims[static_cast<size_t>(p)]);
    }
    IntTensor out{dims, {}, data->type};
    std::vector<int64_t> index(rank, 0);
    for (size_t i = 0; i < data->data.size(); ++i) {
      int64_t from = 0;
      for (size_t d = 0; d < rank; ++d) from += index[d] * strides[static_cast<size_t>(perm[d])];
      out.data.push_back(data->data[static_cast<size_t>(from)]);
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < dims[d]) break;
        index[d] = 0;
      }
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace

StatusOr<int> fold_shape_computations(onnx::GraphProto& graph) {
  std::map<std::string, IntTensor> known;
  std::map<std::string, RealTensor> reals;
  for (const auto& t : graph.initializer()) {
    IntTensor v;
    if (read_ints(t, v)) known[t.name()] = std::move(v);
    RealTensor r;
    if (read_reals(t, r)) reals[t.name()] = std::move(r);
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
    std::optional<RealTensor> real;
    if (node.op_type() == "Constant") {
      for (const auto& a : node.attribute()) {
        IntTensor v;
        RealTensor r;
        if (a.name() == "value" && read_ints(a.t(), v)) known[node.output(0)] = std::move(v);
        if (a.name() == "value" && read_reals(a.t(), r)) reals[node.output(0)] = std::move(r);
      }
    } else if (node.output_size() == 1) {
      value = evaluate(node, known, reals, shapes);
      if (!value) real = evaluate_real(node, reals, known);
    }
    if (real) {
      auto* t = graph.add_initializer();
      t->set_name(node.output(0));
      t->set_data_type(onnx::TensorProto::FLOAT);
      for (int64_t d : real->dims) t->add_dims(d);
      for (double x : real->data) t->add_float_data(static_cast<float>(x));
      reals[node.output(0)] = std::move(*real);
      ++folded;
      continue;
    }
    if (!value) {
      *kept.Add() = std::move(node);
      continue;
    }
    auto* t = graph.add_initializer();
    t->set_name(node.output(0));
    t->set_data_type(value->type);
    for (int64_t d : value->dims) t->add_dims(d);
    for (int64_t x : value->data) {
      if (value->type == onnx::TensorProto::INT64) t->add_int64_data(x);
      else t->add_int32_data(static_cast<int32_t>(x));
    }
    known[node.output(0)] = std::move(*value);
    ++folded;
  }
  graph.mutable_node()->Swap(&kept);
  // Values that became initializers are no longer computed: their inferred infos would now
  // contradict nothing, but inference adds them again; drop them so that it starts clean.
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> infos;
  for (auto& v : *graph.mutable_value_info())
    if (!known.count(v.name()) && !reals.count(v.name())) *infos.Add() = std::move(v);
  graph.mutable_value_info()->Swap(&infos);
  return folded;
}

}  // namespace tunefarm::model
