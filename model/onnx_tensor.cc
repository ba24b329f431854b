#include "model/onnx_tensor.h"

#include <cstring>
#include <type_traits>

#include <fmt/format.h>

#include "common/workload.h"

namespace tunefarm::model {

Status read_tensor(const onnx::TensorProto& t, Value& value) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return invalid_argument(fmt::format("tensor '{}' keeps its data in an external file; save the model with its "
                                        "data inside it",
                                        t.name()));
  value.shape.assign(t.dims().begin(), t.dims().end());
  for (int64_t d : value.shape)
    if (d < 0 || d > kMaxDimension)
      return invalid_argument(fmt::format("tensor '{}' has a dimension of {}", t.name(), d));
  int64_t n = value.elements();
  if (n > kMaxTensorElements) return invalid_argument(fmt::format("tensor '{}' has {} elements", t.name(), n));
  value.constant = true;
  // Elements of type Stored, from raw bytes or the typed field, into `out`.
  auto copy = [&]<typename Stored, typename Field, typename Out>(const Field& typed, std::vector<Out>& out) -> Status {
    const std::string& raw = t.raw_data();
    size_t have = raw.empty() ? static_cast<size_t>(typed.size()) : raw.size() / sizeof(Stored);
    if (static_cast<int64_t>(have) != n)
      return invalid_argument(fmt::format("tensor '{}' of shape {} holds {} values", t.name(), shape_string(value.shape),
                                          have));
    if (raw.empty()) {
      out.assign(typed.begin(), typed.end());
    } else if constexpr (std::is_same_v<Stored, Out>) {
      out.resize(n);
      std::memcpy(out.data(), raw.data(), n * sizeof(Stored));
    } else {
      std::vector<Stored> v(n);
      std::memcpy(v.data(), raw.data(), n * sizeof(Stored));
      out.assign(v.begin(), v.end());
    }
    return Status();
  };
  value.is_float = t.data_type() == onnx::TensorProto::FLOAT;
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      return copy.template operator()<float>(t.float_data(), value.floats);
    case onnx::TensorProto::INT64:
      return copy.template operator()<int64_t>(t.int64_data(), value.ints);
    case onnx::TensorProto::INT32:
      return copy.template operator()<int32_t>(t.int32_data(), value.ints);
    // Masks and flags: raw data holds a byte each, the typed field an int32 each.
    case onnx::TensorProto::BOOL:
    case onnx::TensorProto::UINT8:
      return copy.template operator()<uint8_t>(t.int32_data(), value.ints);
    case onnx::TensorProto::INT8:
      return copy.template operator()<int8_t>(t.int32_data(), value.ints);
    default:
      return invalid_argument(fmt::format("tensor '{}' has element type {}; tunefarm reads float32 and integer tensors",
                                          t.name(), onnx::TensorProto::DataType_Name(t.data_type())));
  }
}

}  // namespace tunefarm::model
