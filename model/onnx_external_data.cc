#include "model/onnx_external_data.h"

#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <system_error>

#include <fmt/format.h>

namespace tunefarm::model {
namespace {

namespace fs = std::filesystem;

// Bytes per element of the types a tensor's data may be stored externally in; 0 for the others.
int64_t element_bytes(int type) {
  switch (type) {
    case onnx::TensorProto::BOOL:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
      return 1;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
      return 2;
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT32:
      return 4;
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::UINT64:
      return 8;
    default:
      return 0;
  }
}

// Every tensor of the graph: initializers, and those in attributes, subgraphs included.
void for_each_tensor_of_nodes(google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes,
                              const std::function<void(onnx::TensorProto&)>& f);

// Every tensor a graph holds: initializers (sparse ones included) and the tensors of its nodes'
// attributes, in subgraphs too.
void for_each_tensor(onnx::GraphProto& graph, const std::function<void(onnx::TensorProto&)>& f) {
  for (auto& t : *graph.mutable_initializer()) f(t);
  for (auto& t : *graph.mutable_sparse_initializer()) {
    f(*t.mutable_values());
    f(*t.mutable_indices());
  }
  for_each_tensor_of_nodes(*graph.mutable_node(), f);
}

void for_each_tensor_of_nodes(google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes,
                              const std::function<void(onnx::TensorProto&)>& f) {
  for (auto& n : nodes)
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_t()) f(*a.mutable_t());
      for (auto& t : *a.mutable_tensors()) f(t);
      if (a.has_sparse_tensor()) {
        f(*a.mutable_sparse_tensor()->mutable_values());
        f(*a.mutable_sparse_tensor()->mutable_indices());
      }
      if (a.has_g()) for_each_tensor(*a.mutable_g(), f);
      for (auto& g : *a.mutable_graphs()) for_each_tensor(g, f);
    }
}

// The model's graph and its local functions.
void for_each_tensor(onnx::ModelProto& model, const std::function<void(onnx::TensorProto&)>& f) {
  for_each_tensor(*model.mutable_graph(), f);
  for (auto& function : *model.mutable_functions()) for_each_tensor_of_nodes(*function.mutable_node(), f);
}

// A tensor that names external data without saying so in data_location is external all the same:
// ONNX's own tools read the file it names.
bool is_external(const onnx::TensorProto& t) {
  return t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0;
}

// The file `location` names, inside `folder` (canonical), or why not.
StatusOr<fs::path> resolve(const fs::path& folder, const std::string& location) {
  fs::path relative(location);
  if (location.empty() || relative.is_absolute() || relative.has_root_name() || relative.has_root_directory())
    return invalid_argument(fmt::format("location '{}' is not a file name relative to the model's folder", location));
  for (const auto& part : relative)
    if (part == "..") return invalid_argument(fmt::format("location '{}' leaves the model's folder", location));
  std::error_code ec;
  fs::path path = fs::canonical(folder / relative, ec);
  if (ec) return not_found(fmt::format("cannot open '{}' beside the model: {}", location, ec.message()));
  // A link may still point elsewhere: what it resolves to must be inside the folder too.
  auto [end, _] = std::mismatch(folder.begin(), folder.end(), path.begin(), path.end());
  if (end != folder.end()) return invalid_argument(fmt::format("location '{}' resolves outside the model's folder", location));
  if (!fs::is_regular_file(path, ec)) return invalid_argument(fmt::format("location '{}' is not a file", location));
  return path;
}

Status inline_tensor(onnx::TensorProto& t, const fs::path& folder, size_t& total, size_t max_bytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      return invalid_argument(fmt::format("{} '{}' is not a number", kv.key(), kv.value()));
    }
  }
  TF_ASSIGN_OR_RETURN(fs::path path, resolve(folder, location));
  int64_t size = element_bytes(t.data_type());
  if (size == 0) return invalid_argument("its element type cannot be stored externally");
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && size > static_cast<int64_t>(max_bytes) / d))
      return invalid_argument(fmt::format("its dimensions describe more than {} bytes", max_bytes));
    size *= d;
  }
  std::error_code ec;
  auto file_size = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) return not_found(fmt::format("cannot read '{}': {}", location, ec.message()));
  if (length < 0) length = size;
  if (length != size)
    return invalid_argument(fmt::format("its data in '{}' is {} bytes; its shape needs {}", location, length, size));
  if (offset < 0 || offset > file_size || length > file_size - offset)
    return invalid_argument(fmt::format("bytes {}..{} of '{}' lie past its end ({} bytes)", offset, offset + length,
                                        location, file_size));
  total += static_cast<size_t>(length);
  if (total > max_bytes)
    return invalid_argument(fmt::format("the model with its data is over {} bytes", max_bytes));
  std::ifstream in(path, std::ios::binary);
  std::string data(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  if (!in.read(data.data(), length)) return invalid_argument(fmt::format("cannot read '{}'", location));
  t.set_raw_data(std::move(data));
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
  return Status();
}

}  // namespace

bool parse_onnx_model(std::string_view bytes, onnx::ModelProto& model) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                             static_cast<int>(std::min<size_t>(bytes.size(), INT32_MAX)));
  in.SetTotalBytesLimit(static_cast<int>(std::min<size_t>(bytes.size() + 1, INT32_MAX)));
  return !bytes.empty() && bytes.size() < INT32_MAX && model.ParseFromCodedStream(&in) && in.ConsumedEntireMessage() &&
         model.has_graph();
}

const onnx::TensorProto* first_external_tensor(onnx::ModelProto& model) {
  const onnx::TensorProto* found = nullptr;
  for_each_tensor(model, [&](onnx::TensorProto& t) {
    if (!found && is_external(t)) found = &t;
  });
  return found;
}

StatusOr<std::string> with_external_data(std::string bytes, const std::string& folder, size_t max_bytes) {
  onnx::ModelProto model;
  // What does not parse is the importer's to report.
  if (!parse_onnx_model(bytes, model)) return bytes;
  if (!first_external_tensor(model)) return bytes;
  std::error_code ec;
  fs::path root = fs::canonical(folder.empty() ? fs::path(".") : fs::path(folder), ec);
  if (ec) return not_found(fmt::format("cannot open the model's folder {}: {}", folder, ec.message()));
  size_t total = bytes.size();
  Status status;
  for_each_tensor(model, [&](onnx::TensorProto& t) {
    if (!status.ok() || !is_external(t)) return;
    status = inline_tensor(t, root, total, max_bytes).with_context(fmt::format("the external data of tensor '{}'", t.name()));
  });
  TF_RETURN_IF_ERROR(status);
  return model.SerializeAsString();
}

StatusOr<std::string> read_model_with_external_data(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return not_found(fmt::format("cannot open model file {}", path));
  auto size = static_cast<size_t>(in.tellg());
  if (size > max_bytes)
    return invalid_argument(fmt::format("{}: the model is {} MiB; at most {} MiB", path, size >> 20, max_bytes >> 20));
  std::string bytes(size, '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)))
    return invalid_argument(fmt::format("cannot read model file {}", path));
  auto with_data = with_external_data(std::move(bytes), fs::path(path).parent_path().string(), max_bytes);
  if (!with_data.ok()) return with_data.status().with_context(path);
  return with_data;
}

}  // namespace tunefarm::model
