#include "model/onnx_import.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "common/workload.h"
#include "model/onnx_shape_folding.h"
#include "model/onnx_tensor.h"

namespace tunefarm::model {
namespace {

// ONNX's exceptions carry several lines of context; errors here are one line.
std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// The static shape of a value_info; false when a dimension is symbolic or unknown.
bool static_shape(const onnx::ValueInfoProto& info, std::vector<int64_t>& shape) {
  shape.clear();
  if (!info.type().has_tensor_type() || !info.type().tensor_type().has_shape()) return false;
  for (const auto& d : info.type().tensor_type().shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() < 0) return false;
    shape.push_back(d.dim_value());
  }
  return true;
}

std::string dims_text(const onnx::ValueInfoProto& info) {
  std::vector<std::string> dims;
  if (info.type().has_tensor_type() && info.type().tensor_type().has_shape())
    for (const auto& d : info.type().tensor_type().shape().dim())
      dims.push_back(d.has_dim_value() ? std::to_string(d.dim_value()) : (d.has_dim_param() ? d.dim_param() : "?"));
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

// Fixes the shapes of the graph's run-time inputs: the user's, where given, over the file's.
Status fix_input_shapes(onnx::GraphProto& graph, const ImportOptions& options) {
  std::set<std::string> initializers;
  for (const auto& t : graph.initializer()) initializers.insert(t.name());
  std::vector<std::string> names;
  for (const auto& input : graph.input())
    if (!initializers.count(input.name())) names.push_back(input.name());
  for (const auto& [name, dims] : options.input_shapes)
    if (std::find(names.begin(), names.end(), name) == names.end())
      return invalid_argument(fmt::format("--input-shape names '{}', but the model's inputs are: {}", name,
                                          fmt::join(names, ", ")));
  for (auto& input : *graph.mutable_input()) {
    if (initializers.count(input.name())) continue;
    auto given = options.input_shapes.find(input.name());
    auto* shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
    if (given != options.input_shapes.end()) {
      if (shape->dim_size() != 0 && shape->dim_size() != static_cast<int>(given->second.size()))
        return invalid_argument(fmt::format("--input-shape {}={}: the model's input '{}' has {} dimensions {}",
                                            input.name(), fmt::join(given->second, ","), input.name(),
                                            shape->dim_size(), dims_text(input)));
      shape->clear_dim();
      for (int64_t d : given->second) shape->add_dim()->set_dim_value(d);
    }
    std::vector<int64_t> dims;
    if (!static_shape(input, dims)) {
      return invalid_argument(fmt::format(
          "input '{}' has symbolic dimensions {}: give its shape with --input-shape {}=<d0,d1,...>", input.name(),
          dims_text(input), input.name()));
    }
    for (int64_t d : dims)
      if (d <= 0 || d > kMaxDimension)
        return invalid_argument(fmt::format("input '{}' has shape {}; each dimension must be 1..{}", input.name(),
                                            shape_string(dims), kMaxDimension));
  }
  return Status();
}

Attribute read_attribute(const onnx::AttributeProto& a) {
  Attribute out;
  out.i = a.i();
  out.f = a.f();
  out.s = a.s();
  out.ints.assign(a.ints().begin(), a.ints().end());
  out.floats.assign(a.floats().begin(), a.floats().end());
  return out;
}

// Attributes ONNX's shape inference divides by or allocates from without checking them first (a
// stride of 0 is a SIGFPE inside the library): refused here, naming the node, before it runs.
Status check_window_attributes(const onnx::GraphProto& graph) {
  static const std::set<std::string> kWindowOps = {"Conv",  "ConvTranspose", "ConvInteger", "QLinearConv",
                                                   "MaxPool", "AveragePool", "LpPool",      "MaxUnpool"};
  for (const auto& n : graph.node()) {
    if (!kWindowOps.count(n.op_type())) continue;
    for (const auto& a : n.attribute()) {
      bool positive = a.name() == "strides" || a.name() == "dilations" || a.name() == "kernel_shape";
      bool non_negative = a.name() == "pads" || a.name() == "output_padding";
      for (int64_t v : a.ints())
        if ((positive && (v < 1 || v > kMaxDimension)) || (non_negative && (v < 0 || v > kMaxDimension)))
          return invalid_argument(fmt::format("node '{}' ({}): attribute {} holds {}", n.name(), n.op_type(), a.name(), v));
      if (a.name() == "group" && (a.i() < 1 || a.i() > kMaxDimension))
        return invalid_argument(fmt::format("node '{}' ({}): group {} must be positive", n.name(), n.op_type(), a.i()));
    }
  }
  return Status();
}

bool is_external(const onnx::TensorProto& t) {
  return t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0;
}

// Whether any tensor of `nodes` (in attributes, subgraphs included) keeps its data elsewhere.
bool nodes_name_external_data(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes);

bool graph_names_external_data(const onnx::GraphProto& graph) {
  for (const auto& t : graph.initializer())
    if (is_external(t)) return true;
  for (const auto& t : graph.sparse_initializer())
    if (is_external(t.values()) || is_external(t.indices())) return true;
  return nodes_name_external_data(graph.node());
}

bool nodes_name_external_data(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes) {
  for (const auto& node : nodes) {
    for (const auto& a : node.attribute()) {
      if ((a.has_t() && is_external(a.t())) || (a.has_g() && graph_names_external_data(a.g()))) return true;
      if (a.has_sparse_tensor() && (is_external(a.sparse_tensor().values()) || is_external(a.sparse_tensor().indices())))
        return true;
      for (const auto& t : a.tensors())
        if (is_external(t)) return true;
      for (const auto& g : a.graphs())
        if (graph_names_external_data(g)) return true;
    }
  }
  return false;
}

bool names_external_data(const onnx::ModelProto& model) {
  if (graph_names_external_data(model.graph())) return true;
  for (const auto& function : model.functions())
    if (nodes_name_external_data(function.node())) return true;
  return false;
}

}  // namespace

StatusOr<Graph> import_onnx(std::string_view bytes, std::string_view source, const ImportOptions& options) {
  auto fail = [&](const std::string& why) { return invalid_argument(fmt::format("{}: {}", source, why)); };
  if (bytes.size() > options.max_bytes)
    return fail(fmt::format("the model is {} MiB; tunerd takes models of at most {} MiB", bytes.size() >> 20,
                            options.max_bytes >> 20));
  onnx::ModelProto proto;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                             static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(static_cast<int>(std::min<size_t>(bytes.size() + 1, INT32_MAX)));
  if (bytes.empty() || !proto.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage() || !proto.has_graph())
    return fail("not an ONNX model (the file does not parse as one; is it truncated?)");
  if (proto.graph().node_size() > options.max_nodes)
    return fail(fmt::format("the model has {} nodes; at most {}", proto.graph().node_size(), options.max_nodes));
  // ONNX's checker looks up the files that external data names, which would tell whoever uploads a
  // model which paths exist on tunerd's host: such a model is refused before the checker runs.
  if (names_external_data(proto))
    return fail("a tensor keeps its data in an external file; save the model with its data inside it");
  try {
    onnx::checker::check_model(proto);
  } catch (const std::exception& e) {
    return fail("not a valid ONNX model: " + one_line(e.what()));
  }
  TF_RETURN_IF_ERROR(fix_input_shapes(*proto.mutable_graph(), options).with_context(std::string(source)));
  TF_RETURN_IF_ERROR(check_window_attributes(proto.graph()).with_context(std::string(source)));
  // Inference, then folding of the shape computations it made known, until nothing folds: each
  // round resolves one more link of a Shape -> Gather -> Concat -> Reshape chain at least.
  for (int round = 0;; ++round) {
    try {
      onnx::ShapeInferenceOptions inference(/*check_type=*/true, /*error_mode=*/1, /*data_propagation=*/true);
      onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), inference);
    } catch (const std::exception& e) {
      return fail("shapes are inconsistent: " + one_line(e.what()));
    }
    TF_ASSIGN_OR_RETURN(int folded, fold_shape_computations(*proto.mutable_graph()));
    if (folded == 0 || round > 64) break;
  }

  Graph graph;
  const onnx::GraphProto& g = proto.graph();
  for (const auto& t : g.initializer()) {
    Value v;
    v.name = t.name();
    TF_RETURN_IF_ERROR(read_tensor(t, v).with_context(std::string(source)));
    graph.values[v.name] = std::move(v);
  }
  auto add_info = [&](const onnx::ValueInfoProto& info) {
    if (graph.find(info.name())) return;
    Value v;
    v.name = info.name();
    std::vector<int64_t> dims;
    if (!static_shape(info, dims)) return;  // Unknown: a node that needs it says so.
    v.shape = std::move(dims);
    v.is_float = info.type().tensor_type().elem_type() == onnx::TensorProto::FLOAT;
    graph.values[v.name] = std::move(v);
  };
  for (const auto& info : g.input()) {
    if (!graph.find(info.name())) graph.inputs.push_back(info.name());
    add_info(info);
  }
  for (const auto& info : g.value_info()) add_info(info);
  for (const auto& info : g.output()) {
    graph.outputs.push_back(info.name());
    add_info(info);
  }
  int index = 0;
  for (const auto& n : g.node()) {
    ++index;
    std::string name = n.name().empty() ? fmt::format("{}_{}", n.op_type(), index) : n.name();
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      return fail(fmt::format("node '{}': operator {} of domain '{}' is not supported", name, n.op_type(), n.domain()));
    if (n.op_type() == "Constant") {
      // A Constant node is a value; its single attribute holds the tensor.
      Value v;
      v.name = n.output(0);
      for (const auto& a : n.attribute()) {
        if (a.name() == "value") {
          TF_RETURN_IF_ERROR(read_tensor(a.t(), v).with_context(fmt::format("{}: node '{}'", source, name)));
        } else if (a.name() == "value_float") {
          v.constant = true;
          v.floats = {a.f()};
        } else if (a.name() == "value_int") {
          v.constant = true;
          v.is_float = false;
          v.ints = {a.i()};
        } else if (a.name() == "value_ints" || a.name() == "value_floats") {
          v.constant = true;
          v.is_float = a.name() == "value_floats";
          v.ints.assign(a.ints().begin(), a.ints().end());
          v.floats.assign(a.floats().begin(), a.floats().end());
          v.shape = {static_cast<int64_t>(v.is_float ? v.floats.size() : v.ints.size())};
        } else {
          return fail(fmt::format("node '{}': Constant with attribute '{}' is not supported", name, a.name()));
        }
      }
      graph.values[v.name] = std::move(v);
      continue;
    }
    Node node;
    node.name = std::move(name);
    node.op = n.op_type();
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) node.attributes[a.name()] = read_attribute(a);
    graph.nodes.push_back(std::move(node));
  }
  return graph;
}

StatusOr<Graph> import_onnx_file(const std::string& path, const ImportOptions& options) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return not_found(fmt::format("cannot open model file {}", path));
  auto size = static_cast<size_t>(in.tellg());
  if (size > options.max_bytes)
    return invalid_argument(fmt::format("{}: the model is {} MiB; at most {} MiB", path, size >> 20, options.max_bytes >> 20));
  std::string bytes(size, '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)))
    return invalid_argument(fmt::format("cannot read model file {}", path));
  return import_onnx(bytes, path, options);
}

}  // namespace tunefarm::model
