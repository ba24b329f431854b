#include "model/onnx_import.h"

#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "common/workload.h"
#include "model/onnx_external_data.h"
#include "model/onnx_opsets.h"
#include "model/onnx_shape_folding.h"
#include "model/onnx_tensor.h"

namespace tunefarm::model {
namespace {

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
  out.strings.assign(a.strings().begin(), a.strings().end());
  // A one-value tensor (ConstantOfShape's fill) as a number.
  if (a.has_t()) {
    Value v;
    if (read_tensor(a.t(), v).ok() && v.elements() == 1) {
      out.f = v.is_float ? v.floats.at(0) : static_cast<float>(v.ints.at(0));
      out.i = v.is_float ? static_cast<int64_t>(v.floats.at(0)) : v.ints.at(0);
    }
  }
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

}  // namespace

StatusOr<Graph> import_onnx(std::string_view bytes, std::string_view source, const ImportOptions& options) {
  auto fail = [&](const std::string& why) { return invalid_argument(fmt::format("{}: {}", source, why)); };
  if (bytes.size() > options.max_bytes)
    return fail(fmt::format("the model is {} MiB; tunerd takes models of at most {} MiB", bytes.size() >> 20,
                            options.max_bytes >> 20));
  onnx::ModelProto proto;
  if (!parse_onnx_model(bytes, proto))
    return fail("not an ONNX model (the file does not parse as one; is it truncated?)");
  // Checked before ONNX's checker, which would open the file the tensor names.
  if (const onnx::TensorProto* t = first_external_tensor(proto))
    return fail(fmt::format("tensor '{}' keeps its data in a file beside the model; the data must come inside it "
                            "(tune-client uploads the files beside the model with it)",
                            t->name()));
  if (proto.graph().node_size() > options.max_nodes)
    return fail(fmt::format("the model has {} nodes; at most {}", proto.graph().node_size(), options.max_nodes));
  TF_RETURN_IF_ERROR(to_known_forms(proto).with_context(std::string(source)));
  TF_RETURN_IF_ERROR(check_onnx_model(proto).with_context(std::string(source)));
  TF_RETURN_IF_ERROR(fix_input_shapes(*proto.mutable_graph(), options).with_context(std::string(source)));
  TF_RETURN_IF_ERROR(check_window_attributes(proto.graph()).with_context(std::string(source)));
  // Inference, then folding of the shape computations it made known, until nothing folds: each
  // round resolves one more link of a Shape -> Gather -> Concat -> Reshape chain at least.
  for (int round = 0;; ++round) {
    try {
      onnx::ShapeInferenceOptions inference(/*check_type=*/true, /*error_mode=*/1, /*data_propagation=*/true);
      onnx::shape_inference::InferShapes(proto, &onnx_schemas(), inference);
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
    int type = info.type().tensor_type().elem_type();
    v.is_float = type == onnx::TensorProto::FLOAT;
    v.dtype = type == onnx::TensorProto::FLOAT   ? "float32"
              : type == onnx::TensorProto::INT64 ? "int64"
              : type == onnx::TensorProto::INT32 ? "int32"
              : type == onnx::TensorProto::BOOL  ? "bool"
                                                 : onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(type));
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
  TF_ASSIGN_OR_RETURN(std::string bytes, read_model_with_external_data(path, options.max_bytes));
  return import_onnx(bytes, path, options);
}

}  // namespace tunefarm::model
