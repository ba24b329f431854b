#include "model/passes/fold_constants.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include <fmt/format.h>

namespace tunefarm::model {
namespace {

// out = in with its axes permuted by `perm` (out dimension i is in dimension perm[i]).
template <typename T>
std::vector<T> transpose(const std::vector<T>& in, const std::vector<int64_t>& shape, const std::vector<int64_t>& perm) {
  size_t rank = shape.size();
  std::vector<int64_t> out_shape(rank), in_strides(rank, 1);
  for (size_t i = rank; i-- > 1;) in_strides[i - 1] = in_strides[i] * shape[i];
  for (size_t i = 0; i < rank; ++i) out_shape[i] = shape[perm[i]];
  std::vector<T> out(in.size());
  std::vector<int64_t> index(rank, 0);
  for (size_t n = 0; n < out.size(); ++n) {
    int64_t from = 0;
    for (size_t i = 0; i < rank; ++i) from += index[i] * in_strides[perm[i]];
    out[n] = in[from];
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < out_shape[i]) break;
      index[i] = 0;
    }
  }
  return out;
}

// The folded value of `node`, or false when it is not one this pass folds. The output's shape
// comes from shape inference, which has already run.
bool fold(const Graph& g, const Node& node, Value& out) {
  static const std::set<std::string> kOps = {"Identity", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast"};
  if (!kOps.count(node.op) || node.inputs.empty() || node.outputs.size() != 1) return false;
  const Value* in = g.find(node.inputs[0]);
  const Value* shape = g.find(node.outputs[0]);
  if (!in || !in->constant || !shape) return false;
  for (size_t i = 1; i < node.inputs.size(); ++i) {
    const Value* v = node.inputs[i].empty() ? nullptr : g.find(node.inputs[i]);
    if (!node.inputs[i].empty() && (!v || !v->constant)) return false;
  }
  out = *in;
  out.name = node.outputs[0];
  out.shape = shape->shape;
  if (out.elements() != in->elements()) return false;
  if (node.op == "Cast") {
    // To float from anything; between integer types (int64, int32, bool) unchanged.
    int64_t to = node.int_attr("to", 0);
    bool to_int = to == 7 /* INT64 */ || to == 6 /* INT32 */ || to == 9 /* BOOL */;
    if (to_int && !in->is_float) {
      if (to == 9)
        for (int64_t& v : out.ints) v = v != 0;
      return true;
    }
    if (to != 1 /* FLOAT */) return false;
    if (!in->is_float) {
      out.floats.assign(in->ints.begin(), in->ints.end());
      out.ints.clear();
      out.is_float = true;
    }
  } else if (node.op == "Transpose") {
    std::vector<int64_t> perm = node.ints_attr("perm");
    if (perm.empty())
      for (size_t i = in->shape.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    if (perm.size() != in->shape.size()) return false;
    for (int64_t p : perm)
      if (p < 0 || p >= static_cast<int64_t>(perm.size())) return false;
    if (in->is_float) out.floats = transpose(in->floats, in->shape, perm);
    else out.ints = transpose(in->ints, in->shape, perm);
  }
  return true;
}

// A constant's element `at` (of its own shape) as a double.
double element(const Value& v, int64_t at) {
  return v.is_float ? static_cast<double>(v.floats[static_cast<size_t>(at)]) : static_cast<double>(v.ints[static_cast<size_t>(at)]);
}

// The flat index into `in` (broadcast to `shape`, NumPy rules) of the output position `index`.
int64_t broadcast_index(const Value& in, const std::vector<int64_t>& shape, const std::vector<int64_t>& index) {
  int64_t flat = 0;
  size_t offset = shape.size() - in.shape.size();
  for (size_t d = 0; d < in.shape.size(); ++d) flat = flat * in.shape[d] + (in.shape[d] == 1 ? 0 : index[d + offset]);
  return flat;
}

// Whether `in` broadcasts to `shape` (NumPy rules).
bool broadcasts(const Value& in, const std::vector<int64_t>& shape) {
  if (in.shape.size() > shape.size()) return false;
  size_t offset = shape.size() - in.shape.size();
  for (size_t d = 0; d < in.shape.size(); ++d)
    if (in.shape[d] != 1 && in.shape[d] != shape[d + offset]) return false;
  return true;
}

// Calls f(flat, index) for every position of `shape`.
void for_each_index(const std::vector<int64_t>& shape, const std::function<void(int64_t, const std::vector<int64_t>&)>& f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    f(flat, index);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

// GatherElements' and ScatterElements' position in x of index i of `indices`: i with its `axis`
// coordinate replaced by the index there (negative from the end). Out of range clears `inside`.
int64_t position_along(const Value& x, const Value& indices, int64_t axis, int64_t flat, const std::vector<int64_t>& i,
                       bool& inside) {
  int64_t f = 0;
  for (size_t d = 0; d < i.size(); ++d) {
    int64_t at = i[d];
    if (static_cast<int64_t>(d) == axis) {
      at = indices.ints[static_cast<size_t>(flat)];
      if (at < 0) at += x.shape[d];
    }
    if (at < 0 || at >= x.shape[d]) inside = false;
    f = f * x.shape[d] + std::clamp<int64_t>(at, 0, x.shape[d] - 1);
  }
  return f;
}

// The computations on constants alone that exporters write for attention masks (Swin's shifted
// windows: ConstantOfShape, Slice, ScatterND, Sub, Equal, Not, Where), evaluated here so that the
// built model reads their result as a weight. Small tensors only.
bool evaluate(const Graph& g, const Node& node, Value& out) {
  static const std::set<std::string> kUnary = {"Not", "Neg", "Abs", "Sqrt", "Exp", "Log", "Floor", "Ceil", "Reciprocal", "Sin", "Cos"};
  static const std::set<std::string> kBinary = {"Where", "Equal", "Sub", "Add", "Mul", "Div", "Mod", "Less",
                                                "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Pow", "Min", "Max"};
  static const std::set<std::string> kOthers = {"ConstantOfShape", "Slice", "ScatterND", "ScatterElements", "Expand",
                                                "Concat", "Gather", "Range", "GatherElements", "Trilu",
                                                "BatchNormalization"};
  static const std::set<std::string> kReductions = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2",
                                                    "ReduceSumSquare"};
  if ((!kUnary.count(node.op) && !kBinary.count(node.op) && !kOthers.count(node.op) && !kReductions.count(node.op)) ||
      node.outputs.size() != 1)
    return false;
  std::vector<const Value*> in;
  int64_t largest = 0;
  for (const auto& name : node.inputs) {
    const Value* v = name.empty() ? nullptr : g.find(name);
    if (!name.empty() && (!v || !v->constant || static_cast<int64_t>(v->is_float ? v->floats.size() : v->ints.size()) != v->elements()))
      return false;
    in.push_back(v);
    if (v) largest = std::max(largest, v->elements());
  }
  // Small tensors, or no larger than a constant the file holds already: a weight computed from
  // the file's parameters (wav2vec 2.0's weight-normalized convolution, 4.7M values) folds, where a
  // ConstantOfShape or Expand of a few values cannot make the pass allocate what the file does not.
  const Value* shape = g.find(node.outputs[0]);
  if (!shape || (shape->elements() > (int64_t{1} << 22) && shape->elements() > largest) ||
      (in.empty() && node.op != "ConstantOfShape"))
    return false;
  out = Value();
  out.name = node.outputs[0];
  out.shape = shape->shape;
  out.constant = true;
  out.is_float = shape->is_float;
  std::vector<double> data(static_cast<size_t>(std::max<int64_t>(1, out.elements())), 0.0);
  const std::string& op = node.op;
  if (op == "ConstantOfShape") {
    double fill = node.attributes.count("value") ? (out.is_float ? node.attributes.at("value").f : node.attributes.at("value").i) : 0.0;
    std::fill(data.begin(), data.end(), fill);
  } else if (op == "Range") {
    if (in.size() != 3) return false;
    for (size_t i = 0; i < data.size(); ++i) data[i] = element(*in[0], 0) + static_cast<double>(i) * element(*in[2], 0);
  } else if (kUnary.count(op) && in[0]->elements() == out.elements()) {
    // Tables computed from constants (a rotary embedding's cos and sin, T5's position buckets).
    for (size_t i = 0; i < data.size(); ++i) {
      double v = element(*in[0], static_cast<int64_t>(i));
      data[i] = op == "Not" ? v == 0 : op == "Neg" ? -v : op == "Abs" ? std::abs(v) : op == "Sqrt" ? std::sqrt(v)
              : op == "Exp" ? std::exp(v) : op == "Log" ? std::log(v) : op == "Floor" ? std::floor(v)
              : op == "Ceil" ? std::ceil(v) : op == "Reciprocal" ? 1.0 / v : op == "Sin" ? std::sin(v) : std::cos(v);
    }
  } else if (op == "BatchNormalization") {
    // Weight standardization (NFNet's ScaledStdConv2d: F.batch_norm over the weight's rows, its
    // mean and variance ReduceMeans of the weight): (x - mean) / sqrt(var + epsilon) * scale + bias
    // per index of axis 1.
    const Value& x = *in[0];
    if (in.size() != 5 || x.shape.size() < 2 || x.shape != out.shape || node.int_attr("training_mode", 0) != 0) return false;
    int64_t channels = x.shape[1], inner = x.elements() / (x.shape[0] * channels);
    for (size_t k = 1; k < 5; ++k)
      if (!in[k] || in[k]->elements() != channels) return false;
    double epsilon = node.float_attr("epsilon", 1e-5f);
    for (size_t i = 0; i < data.size(); ++i) {
      int64_t c = static_cast<int64_t>(i) / inner % channels;
      data[i] = (element(x, static_cast<int64_t>(i)) - element(*in[3], c)) / std::sqrt(element(*in[4], c) + epsilon) *
                    element(*in[1], c) + element(*in[2], c);
    }
  } else if (op == "Trilu") {
    // Causal masks: the part of each matrix on and above (upper) or below the k-th diagonal kept.
    const Value& x = *in[0];
    if (x.shape.size() < 2 || x.shape != out.shape || (in.size() > 1 && in[1] && (in[1]->is_float || in[1]->ints.size() != 1)))
      return false;
    int64_t k = in.size() > 1 && in[1] ? in[1]->ints[0] : 0;
    bool upper = node.int_attr("upper", 1) != 0;
    size_t rank = x.shape.size();
    for_each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& i) {
      int64_t above = i[rank - 1] - i[rank - 2];
      data[flat] = (upper ? above >= k : above <= k) ? element(x, flat) : 0.0;
    });
  } else if (op == "Expand" && broadcasts(*in[0], out.shape)) {
    for_each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& i) { data[flat] = element(*in[0], broadcast_index(*in[0], out.shape, i)); });
  } else if (kBinary.count(op)) {
    // Min and Max take any number of inputs; two are folded.
    if (in.size() < 2 || (op == "Where" && in.size() != 3) || ((op == "Min" || op == "Max") && in.size() != 2)) return false;
    for (const Value* v : in)
      if (!v || !broadcasts(*v, out.shape)) return false;
    for_each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& i) {
      auto at = [&](size_t k) { return element(*in[k], broadcast_index(*in[k], out.shape, i)); };
      double a = at(0), b = at(1);
      data[flat] = op == "Where" ? (a != 0 ? b : at(2)) : op == "Equal" ? a == b : op == "Sub" ? a - b : op == "Add" ? a + b
                 : op == "Mul" ? a * b : op == "Less" ? a < b : op == "LessOrEqual" ? a <= b : op == "Greater" ? a > b
                 : op == "GreaterOrEqual" ? a >= b : op == "And" ? (a != 0 && b != 0) : op == "Or" ? (a != 0 || b != 0)
                 : op == "Pow" ? std::pow(a, b) : op == "Min" ? std::min(a, b) : op == "Max" ? std::max(a, b)
                 : b != 0 ? a / b : 0;
      if (op == "Div" && !out.is_float && b != 0) data[flat] = std::trunc(a / b);
      // Mod of integers takes the divisor's sign (fmod=0), as Python's %.
      if (op == "Mod") data[flat] = b == 0 ? 0 : node.int_attr("fmod", 0) ? std::fmod(a, b) : a - std::floor(a / b) * b;
    });
  } else if (op == "GatherElements") {
    // The data at each index, the axis' position taken from the indices (shaped as the output).
    if (in.size() != 2) return false;
    const Value &x = *in[0], &idx = *in[1];
    int64_t axis = node.int_attr("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(x.shape.size());
    if (idx.is_float || idx.shape != out.shape || x.shape.size() != out.shape.size() || axis < 0 ||
        axis >= static_cast<int64_t>(x.shape.size()))
      return false;
    bool inside = true;
    for_each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& i) {
      data[flat] = element(x, position_along(x, idx, axis, flat, i, inside));
    });
    if (!inside) return false;
  } else if (op == "ScatterElements") {
    // data with updates[i] written where i, its position along `axis` taken from indices[i], lies
    // (BEiT's relative position index, built with select_scatter). Later updates of one position
    // win, or combine by the reduction.
    if (in.size() != 3 || in[1]->is_float) return false;
    const Value &x = *in[0], &idx = *in[1], &upd = *in[2];
    int64_t axis = node.int_attr("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(x.shape.size());
    std::string reduction = node.attributes.count("reduction") ? node.attributes.at("reduction").s : "none";
    if (x.elements() != static_cast<int64_t>(data.size()) || idx.shape != upd.shape || idx.shape.size() != x.shape.size() ||
        axis < 0 || axis >= static_cast<int64_t>(x.shape.size()) ||
        (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min"))
      return false;
    for (size_t i = 0; i < data.size(); ++i) data[i] = element(x, static_cast<int64_t>(i));
    bool inside = true;
    for_each_index(idx.shape, [&](int64_t flat, const std::vector<int64_t>& i) {
      double v = element(upd, flat), &to = data[static_cast<size_t>(position_along(x, idx, axis, flat, i, inside))];
      to = reduction == "add" ? to + v : reduction == "mul" ? to * v : reduction == "max" ? std::max(to, v)
         : reduction == "min" ? std::min(to, v) : v;
    });
    if (!inside) return false;
  } else if (op == "Slice" || op == "Gather" || op == "Concat") {
    // Each output position reads one input position: out index -> (input, input index).
    const Value& x = *in[0];
    size_t rank = x.shape.size();
    auto flat_of = [](const std::vector<int64_t>& dims, const std::vector<int64_t>& i) {
      int64_t f = 0;
      for (size_t d = 0; d < dims.size(); ++d) f = f * dims[d] + i[d];
      return f;
    };
    if (op == "Slice") {
      if (in.size() < 3 || in[1]->is_float || in[2]->is_float || in[2]->ints.size() != in[1]->ints.size()) return false;
      for (size_t extra = 3; extra < in.size(); ++extra)
        if (in[extra] && (in[extra]->is_float || in[extra]->ints.size() != in[1]->ints.size())) return false;
      std::vector<int64_t> begin(rank, 0), step(rank, 1);
      for (size_t k = 0; k < in[1]->ints.size(); ++k) {
        int64_t a = in.size() > 3 && in[3] ? in[3]->ints.at(k) : static_cast<int64_t>(k);
        if (a < 0) a += static_cast<int64_t>(rank);
        if (a < 0 || a >= static_cast<int64_t>(rank)) return false;
        int64_t st = in.size() > 4 && in[4] ? in[4]->ints.at(k) : 1, dim = x.shape[static_cast<size_t>(a)];
        if (st == 0 || dim == 0) return false;
        int64_t b = in[1]->ints[k] < 0 ? in[1]->ints[k] + dim : in[1]->ints[k];
        begin[static_cast<size_t>(a)] = st > 0 ? std::clamp<int64_t>(b, 0, dim) : std::clamp<int64_t>(b, 0, dim - 1);
        step[static_cast<size_t>(a)] = st;
      }
      if (out.shape.size() != rank) return false;
      for (size_t d = 0; d < rank; ++d) {
        int64_t last = begin[d] + (out.shape[d] - 1) * step[d];
        if (out.shape[d] > 0 && (last < 0 || last >= x.shape[d])) return false;
      }
      for_each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& i) {
        std::vector<int64_t> at(rank);
        for (size_t d = 0; d < rank; ++d) at[d] = begin[d] + i[d] * step[d];
        data[flat] = element(x, flat_of(x.shape, at));
      });
    } else if (op == "Gather") {
      if (in.size() != 2 || in[1]->is_float) return false;
      int64_t axis = node.int_attr("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(rank);
      if (axis < 0 || axis >= static_cast<int64_t>(rank)) return false;
      size_t a = static_cast<size_t>(axis), index_rank = in[1]->shape.size();
      for (int64_t k : in[1]->ints)
        if (k < -x.shape[a] || k >= x.shape[a]) return false;
      if (out.shape.size() != rank - 1 + index_rank) return false;
      for_each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& i) {
        std::vector<int64_t> at(i.begin(), i.begin() + static_cast<std::ptrdiff_t>(a));
        std::vector<int64_t> idx(i.begin() + static_cast<std::ptrdiff_t>(a), i.begin() + static_cast<std::ptrdiff_t>(a + index_rank));
        int64_t k = in[1]->ints[static_cast<size_t>(flat_of(in[1]->shape, idx))];
        at.push_back(k < 0 ? k + x.shape[a] : k);
        at.insert(at.end(), i.begin() + static_cast<std::ptrdiff_t>(a + index_rank), i.end());
        data[flat] = element(x, flat_of(x.shape, at));
      });
    } else {
      int64_t axis = node.int_attr("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(rank);
      if (axis < 0 || axis >= static_cast<int64_t>(rank) || out.shape.size() != rank) return false;
      size_t a = static_cast<size_t>(axis);
      for (const Value* part : in)
        for (size_t d = 0; d < rank; ++d)
          if (!part || part->shape.size() != rank || (d != a && part->shape[d] != out.shape[d])) return false;
      for_each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& i) {
        std::vector<int64_t> at = i;
        for (const Value* part : in) {
          if (at[a] < part->shape[a]) {
            data[flat] = element(*part, flat_of(part->shape, at));
            return;
          }
          at[a] -= part->shape[a];
        }
      });
    }
  } else if (op == "ScatterND") {
    // data with the slices that the last axis of `indices` names replaced by `updates`.
    auto reduction = node.attributes.find("reduction");
    if (in.size() != 3 || in[1]->is_float || (reduction != node.attributes.end() && reduction->second.s != "none"))
      return false;
    const Value &x = *in[0], &idx = *in[1], &upd = *in[2];
    if (x.elements() != static_cast<int64_t>(data.size()) || idx.shape.empty() || idx.shape.back() < 1 ||
        idx.shape.back() > static_cast<int64_t>(x.shape.size()))
      return false;
    for (size_t i = 0; i < data.size(); ++i) data[i] = element(x, static_cast<int64_t>(i));
    size_t k = static_cast<size_t>(idx.shape.back());
    int64_t slice = 1;
    for (size_t d = k; d < x.shape.size(); ++d) slice *= x.shape[d];
    int64_t count = idx.elements() / static_cast<int64_t>(k);
    if (upd.elements() != count * slice) return false;
    for (int64_t u = 0; u < count; ++u) {
      int64_t base = 0;
      for (size_t d = 0; d < k; ++d) {
        int64_t v = idx.ints[static_cast<size_t>(u) * k + d];
        if (v < 0) v += x.shape[d];
        if (v < 0 || v >= x.shape[d]) return false;
        base = base * x.shape[d] + v;
      }
      for (int64_t e = 0; e < slice; ++e) data[static_cast<size_t>(base * slice + e)] = element(upd, u * slice + e);
    }
  } else if (kReductions.count(op)) {
    // Over the axes of the attribute (before opset 18) or the second input; none: every axis, or
    // none at all with noop_with_empty_axes.
    const Value& x = *in[0];
    size_t rank = x.shape.size();
    std::vector<int64_t> axes = node.ints_attr("axes");
    if (in.size() > 1 && in[1]) {
      if (in[1]->is_float) return false;
      axes = in[1]->ints;
    }
    std::vector<bool> reduced(rank, axes.empty() && !node.int_attr("noop_with_empty_axes", 0));
    for (int64_t a : axes) {
      if (a < 0) a += static_cast<int64_t>(rank);
      if (a < 0 || a >= static_cast<int64_t>(rank)) return false;
      reduced[static_cast<size_t>(a)] = true;
    }
    bool keep = node.int_attr("keepdims", 1) != 0;
    std::vector<int64_t> kept;
    double count = 1;
    for (size_t d = 0; d < rank; ++d) {
      if (!reduced[d]) kept.push_back(x.shape[d]);
      else if (keep) kept.push_back(1);
      if (reduced[d]) count *= static_cast<double>(x.shape[d]);
    }
    if (kept != out.shape || x.elements() == 0) return false;
    bool extreme = op == "ReduceMax" || op == "ReduceMin";
    std::vector<bool> first(data.size(), true);
    for_each_index(x.shape, [&](int64_t flat, const std::vector<int64_t>& i) {
      int64_t to = 0;
      for (size_t d = 0; d < rank; ++d) to = to * (reduced[d] ? 1 : x.shape[d]) + (reduced[d] ? 0 : i[d]);
      double v = element(x, flat), &acc = data[static_cast<size_t>(to)];
      if (extreme) acc = first[static_cast<size_t>(to)] ? v : op == "ReduceMax" ? std::max(acc, v) : std::min(acc, v);
      else acc += op == "ReduceL2" || op == "ReduceSumSquare" ? v * v : v;
      first[static_cast<size_t>(to)] = false;
    });
    for (double& v : data) v = op == "ReduceL2" ? std::sqrt(v) : op == "ReduceMean" ? v / count : v;
  } else {
    return false;
  }
  if (out.is_float) out.floats.assign(data.begin(), data.end());
  else for (double d : data) out.ints.push_back(static_cast<int64_t>(d));
  return true;
}

}  // namespace

StatusOr<int> fold_constants(Graph& graph) {
  int folded = 0;
  std::vector<Node> kept;
  for (Node& node : graph.nodes) {
    Value value;
    if (fold(graph, node, value) || evaluate(graph, node, value)) {
      graph.values[value.name] = std::move(value);
      ++folded;
    } else {
      kept.push_back(std::move(node));
    }
  }
  graph.nodes = std::move(kept);
  return folded;
}

}  // namespace tunefarm::model
