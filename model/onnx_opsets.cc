#include "model/onnx_opsets.h"

#include <onnx/checker.h>
#include <onnx/defs/shape_inference.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/onnx_tensor.h"

namespace tunefarm::model {
namespace {

// The newest opset and IR version libonnx checks.
constexpr int kLibraryOpset = 17;
constexpr int64_t kLibraryIrVersion = onnx::IR_VERSION;

bool is_onnx_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// An elementwise operator of one float input: the output is shaped and typed as the input.
onnx::OpSchema unary_schema(const char* name, int since, const std::function<void(onnx::OpSchema&)>& attributes) {
  onnx::OpSchema s(name, __FILE__, __LINE__);
  s.SetDomain("").SinceVersion(since);
  attributes(s);
  s.Input(0, "X", "", "T").Output(0, "Y", "", "T");
  s.TypeConstraint("T", {"tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)"}, "");
  s.TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
  s.Finalize();
  return s;
}

// A normalization added after opset 17: X and its scale (and bias), Y shaped and typed as X.
onnx::OpSchema normalization_schema(const char* name, int since, bool bias,
                                    const std::function<void(onnx::OpSchema&)>& attributes) {
  onnx::OpSchema s(name, __FILE__, __LINE__);
  s.SetDomain("").SinceVersion(since);
  attributes(s);
  s.Input(0, "X", "", "T").Input(1, "scale", "", "T");
  if (bias) s.Input(2, "bias", "", "T");
  s.Output(0, "Y", "", "T");
  s.TypeConstraint("T", {"tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)"}, "");
  s.TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
  s.Finalize();
  return s;
}

// Attention's output Y (opset 23): [B, q_heads, q_seq, v_head] for 4-D inputs, [B, q_seq, q_heads x
// v_head] for 3-D ones (v_head = V's hidden size / kv_num_heads); its other outputs are left
// without shapes (the build refuses a node whose cache outputs are read).
void infer_attention(onnx::InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (ctx.getNumInputs() < 3) return;
  const auto* q = ctx.getInputType(0);
  const auto* v = ctx.getInputType(2);
  if (!q || !v || !q->tensor_type().has_shape() || !v->tensor_type().has_shape()) return;
  const auto& qs = q->tensor_type().shape();
  const auto& vs = v->tensor_type().shape();
  if (qs.dim_size() != vs.dim_size() || (qs.dim_size() != 3 && qs.dim_size() != 4)) return;
  for (int d = 0; d < qs.dim_size(); ++d)
    if (!qs.dim(d).has_dim_value() || !vs.dim(d).has_dim_value()) return;
  auto* out = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  if (qs.dim_size() == 4) {
    out->clear_dim();
    for (int64_t d : {qs.dim(0).dim_value(), qs.dim(1).dim_value(), qs.dim(2).dim_value(), vs.dim(3).dim_value()})
      out->add_dim()->set_dim_value(d);
    return;
  }
  const auto* qh = ctx.getAttribute("q_num_heads");
  const auto* kvh = ctx.getAttribute("kv_num_heads");
  if (!qh || !kvh || qh->i() <= 0 || kvh->i() <= 0)
    fail_shape_inference("Attention over 3-D inputs needs positive q_num_heads and kv_num_heads attributes");
  out->clear_dim();
  for (int64_t d : {qs.dim(0).dim_value(), qs.dim(1).dim_value(), qh->i() * (vs.dim(2).dim_value() / kvh->i())})
    out->add_dim()->set_dim_value(d);
}

onnx::OpSchema attention_schema(int since) {
  onnx::OpSchema s("Attention", __FILE__, __LINE__);
  s.SetDomain("").SinceVersion(since);
  s.Attr("is_causal", "", onnx::AttributeProto::INT, static_cast<int64_t>(0));
  s.Attr("kv_num_heads", "", onnx::AttributeProto::INT, false);
  s.Attr("q_num_heads", "", onnx::AttributeProto::INT, false);
  s.Attr("qk_matmul_output_mode", "", onnx::AttributeProto::INT, static_cast<int64_t>(0));
  s.Attr("scale", "", onnx::AttributeProto::FLOAT, false);
  s.Attr("softcap", "", onnx::AttributeProto::FLOAT, 0.0f);
  s.Attr("softmax_precision", "", onnx::AttributeProto::INT, false);
  s.Input(0, "Q", "", "T1").Input(1, "K", "", "T1").Input(2, "V", "", "T2");
  s.Input(3, "attn_mask", "", "U", onnx::OpSchema::Optional);
  s.Input(4, "past_key", "", "T1", onnx::OpSchema::Optional).Input(5, "past_value", "", "T2", onnx::OpSchema::Optional);
  if (since >= 24) s.Input(6, "nonpad_kv_seqlen", "", "tensor(int64)", onnx::OpSchema::Optional);
  s.Output(0, "Y", "", "T1");
  s.Output(1, "present_key", "", "T1", onnx::OpSchema::Optional).Output(2, "present_value", "", "T2", onnx::OpSchema::Optional);
  s.Output(3, "qk_matmul_output", "", "T1", onnx::OpSchema::Optional);
  const std::vector<std::string> floats = {"tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)"};
  s.TypeConstraint("T1", floats, "").TypeConstraint("T2", floats, "");
  std::vector<std::string> masks = floats;
  masks.push_back("tensor(bool)");
  s.TypeConstraint("U", masks, "");
  s.TypeAndShapeInferenceFunction(infer_attention);
  s.Finalize();
  return s;
}

// Einsum's output shape from its equation, where libonnx 1.12 infers its rank only (attention's
// scores would have no shape then); equations with an ellipsis or no output keep libonnx's answer.
void infer_einsum(onnx::InferenceContext& ctx, const onnx::InferenceFunction& library) {
  library(ctx);
  const auto* attr = ctx.getAttribute("equation");
  if (!attr) return;
  std::string eq;
  for (char c : attr->s())
    if (c != ' ') eq += c;
  size_t arrow = eq.find("->");
  if (arrow == std::string::npos || eq.find('.') != std::string::npos) return;
  std::map<char, int64_t> dims;
  size_t start = 0;
  for (size_t i = 0; i < ctx.getNumInputs(); ++i) {
    size_t end = std::min(eq.find(',', start), arrow);
    std::string letters = eq.substr(start, end - start);
    const auto* type = ctx.getInputType(i);
    if (!type || !type->tensor_type().has_shape()) return;
    const auto& shape = type->tensor_type().shape();
    if (shape.dim_size() != static_cast<int>(letters.size())) return;
    for (size_t d = 0; d < letters.size(); ++d) {
      if (!shape.dim(static_cast<int>(d)).has_dim_value()) return;
      int64_t v = shape.dim(static_cast<int>(d)).dim_value();
      // A dimension of 1 broadcasts against the others.
      if (!dims.count(letters[d]) || dims[letters[d]] == 1) dims[letters[d]] = v;
    }
    start = end + 1;
  }
  auto* out = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  out->clear_dim();
  for (char c : eq.substr(arrow + 2)) {
    if (!dims.count(c)) return;
    out->add_dim()->set_dim_value(dims[c]);
  }
}

class Schemas final : public onnx::ISchemaRegistry {
 public:
  Schemas() {
    if (const onnx::OpSchema* einsum = onnx::OpSchemaRegistry::Schema("Einsum", kLibraryOpset, "")) {
      onnx::OpSchema s = *einsum;
      onnx::InferenceFunction library = einsum->GetTypeAndShapeInferenceFunction();
      s.TypeAndShapeInferenceFunction([library](onnx::InferenceContext& ctx) { infer_einsum(ctx, library); });
      added_.push_back(std::move(s));
    }
    added_.push_back(unary_schema("Mish", 18, [](onnx::OpSchema&) {}));
    added_.push_back(unary_schema("Gelu", 20, [](onnx::OpSchema& s) {
      s.Attr("approximate", "", onnx::AttributeProto::STRING, std::string("none"));
    }));
    added_.push_back(unary_schema("Swish", 24, [](onnx::OpSchema& s) {
      s.Attr("alpha", "", onnx::AttributeProto::FLOAT, 1.0f);
    }));
    // GroupNormalization's scale and bias are one per group in opset 18, one per channel from 21
    // (the newer first: GetSchema takes the first whose opset is not past the model's).
    for (int since : {21, 18}) {
      added_.push_back(normalization_schema("GroupNormalization", since, true, [since](onnx::OpSchema& s) {
        s.Attr("epsilon", "", onnx::AttributeProto::FLOAT, 1e-5f);
        s.Attr("num_groups", "", onnx::AttributeProto::INT, true);
        if (since >= 21) s.Attr("stash_type", "", onnx::AttributeProto::INT, static_cast<int64_t>(1));
      }));
    }
    // Attention as opset 24 writes it (a nonpad_kv_seqlen input added), then 23's.
    added_.push_back(attention_schema(24));
    added_.push_back(attention_schema(23));
    added_.push_back(normalization_schema("RMSNormalization", 23, false, [](onnx::OpSchema& s) {
      s.Attr("axis", "", onnx::AttributeProto::INT, static_cast<int64_t>(-1));
      s.Attr("epsilon", "", onnx::AttributeProto::FLOAT, 1e-5f);
      s.Attr("stash_type", "", onnx::AttributeProto::INT, static_cast<int64_t>(1));
    }));
  }

  const onnx::OpSchema* GetSchema(const std::string& op, int version, const std::string& domain) const override {
    if (is_onnx_domain(domain))
      for (const auto& s : added_)
        if (s.Name() == op && s.SinceVersion() <= version) return &s;
    return onnx::OpSchemaRegistry::Instance()->GetSchema(op, version, domain);
  }

 private:
  std::vector<onnx::OpSchema> added_;
};

const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

void drop_attribute(onnx::NodeProto& node, const std::string& name) {
  auto* attributes = node.mutable_attribute();
  for (int i = 0; i < attributes->size(); ++i)
    if (attributes->Get(i).name() == name) {
      attributes->DeleteSubrange(i, 1);
      return;
    }
}

// An attribute an opset added whose default keeps the earlier meaning: dropped where it holds the
// default, the node refused where it does not.
struct AddedAttribute {
  const char* op;
  int since;
  const char* name;
  std::function<bool(const onnx::AttributeProto&)> is_default;
};

bool all_ones(const onnx::AttributeProto& a) {
  return std::all_of(a.ints().begin(), a.ints().end(), [](int64_t v) { return v == 1; });
}
bool is_zero(const onnx::AttributeProto& a) { return a.i() == 0; }
std::function<bool(const onnx::AttributeProto&)> is_text(const char* text) {
  return [text](const onnx::AttributeProto& a) { return a.s() == text; };
}
bool any_value(const onnx::AttributeProto&) { return true; }

const std::vector<AddedAttribute>& added_attributes() {
  static const std::vector<AddedAttribute> kAdded = {
      {"LpPool", 18, "dilations", all_ones},
      {"LpPool", 18, "ceil_mode", is_zero},
      {"Resize", 18, "antialias", is_zero},
      {"Resize", 18, "keep_aspect_ratio_policy", is_text("stretch")},
      {"AveragePool", 19, "dilations", all_ones},
      // Saturation and rounding apply to casts into float8 and float4, which no tensor here has.
      {"Cast", 19, "saturate", any_value},
      {"CastLike", 19, "saturate", any_value},
      {"Cast", 24, "round_mode", any_value},
      {"CastLike", 24, "round_mode", any_value},
      {"Range", 27, "stash_type", any_value},
      {"SpaceToDepth", 28, "mode", is_text("DCR")},
  };
  return kAdded;
}

// Operators whose form changed after opset 17 in ways not rewritten here, from the opset that
// changed them (operators added since then are refused for having no schema).
const std::map<std::string, int>& changed_forms() {
  static const std::map<std::string, int> kChanged = {
      {"OptionalHasElement", 18}, {"DFT", 20}, {"GridSample", 20}, {"QuantizeLinear", 19},
      {"DequantizeLinear", 21},
  };
  return kChanged;
}

const std::set<std::string>& reductions() {
  static const std::set<std::string> kReductions = {"ReduceL1",  "ReduceL2",  "ReduceLogSum", "ReduceLogSumExp",
                                                    "ReduceMax", "ReduceMean", "ReduceMin",   "ReduceProd",
                                                    "ReduceSumSquare"};
  return kReductions;
}

class Rewriter {
 public:
  Rewriter(const onnx::GraphProto& graph, int opset) : opset_(opset) {
    for (const auto& t : graph.initializer()) constants_[t.name()] = &t;
    for (const auto& n : graph.node())
      if (n.op_type() == "Constant" && n.output_size() == 1)
        if (const auto* a = find_attribute(n, "value")) constants_[n.output(0)] = &a->t();
  }

  // Why `node` cannot be taken, or empty.
  std::string rewrite(onnx::NodeProto& node) {
    if (!is_onnx_domain(node.domain())) return "";
    const std::string& op = node.op_type();
    if (auto it = changed_forms().find(op); it != changed_forms().end() && it->second <= opset_)
      return fmt::format("changed in opset {} in a way tunefarm does not read", it->second);
    for (const auto& added : added_attributes()) {
      if (added.op != op || added.since > opset_) continue;
      const auto* a = find_attribute(node, added.name);
      if (!a) continue;
      if (!added.is_default(*a)) return fmt::format("attribute {} (opset {}) is not supported", added.name, added.since);
      drop_attribute(node, added.name);
    }
    if (reductions().count(op) && opset_ >= 18) return reduction_axes(node);
    if (op == "Split" && opset_ >= 18) {
      // Split evenly into its outputs, which is what Split of opset 13 does without sizes.
      if (find_attribute(node, "num_outputs") && (node.input_size() < 2 || node.input(1).empty()))
        drop_attribute(node, "num_outputs");
      return "";
    }
    if (op == "Pad" && opset_ >= 18 && node.input_size() > 3 && !node.input(3).empty())
      return "padding some axes only (the axes input of opset 18) is not supported";
    if (op == "Pad" && opset_ >= 19)
      if (const auto* mode = find_attribute(node, "mode"); mode && mode->s() == "wrap")
        return "mode 'wrap' (opset 19) is not supported";
    if (op == "Resize" && opset_ >= 18 && find_attribute(node, "axes"))
      return "resizing some axes only (opset 18) is not supported";
    if (op == "Resize" && opset_ >= 19)
      if (const auto* m = find_attribute(node, "coordinate_transformation_mode"); m && m->s() == "half_pixel_symmetric")
        return "coordinate_transformation_mode 'half_pixel_symmetric' (opset 19) is not supported";
    return "";
  }

 private:
  // Reductions of opset 18 take their axes as an input; those of 13 as an attribute.
  std::string reduction_axes(onnx::NodeProto& node) {
    const auto* noop = find_attribute(node, "noop_with_empty_axes");
    bool noop_when_empty = noop && noop->i() != 0;
    drop_attribute(node, "noop_with_empty_axes");
    if (node.input_size() < 2 || node.input(1).empty()) {
      // No axes: all of them, or none (the node copies its input).
      if (noop_when_empty) {
        node.set_op_type("Identity");
        node.clear_attribute();
      }
      node.mutable_input()->DeleteSubrange(1, node.input_size() - 1);
      return "";
    }
    auto it = constants_.find(node.input(1));
    if (it == constants_.end()) return "axes computed at run time are not supported";
    Value axes;
    if (!read_tensor(*it->second, axes).ok() || axes.is_float) return "axes that are not an integer tensor";
    node.mutable_input()->DeleteSubrange(1, node.input_size() - 1);
    if (axes.ints.empty()) {
      if (noop_when_empty) {
        node.set_op_type("Identity");
        node.clear_attribute();
      }
      return "";
    }
    auto* a = node.add_attribute();
    a->set_name("axes");
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : axes.ints) a->add_ints(v);
    return "";
  }

  int opset_;
  std::map<std::string, const onnx::TensorProto*> constants_;
};

}  // namespace

std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

int onnx_opset(const onnx::ModelProto& model) {
  for (const auto& o : model.opset_import())
    if (is_onnx_domain(o.domain())) return static_cast<int>(o.version());
  return 0;
}

const onnx::ISchemaRegistry& onnx_schemas() {
  static const Schemas kSchemas;
  return kSchemas;
}

Status to_known_forms(onnx::ModelProto& model) {
  if (model.ir_version() <= 0) return invalid_argument("not a valid ONNX model: it has no IR version");
  // Read at the IR version libonnx knows: nothing a newer one adds is read here.
  if (model.ir_version() > kLibraryIrVersion) model.set_ir_version(kLibraryIrVersion);
  int opset = onnx_opset(model);
  auto& graph = *model.mutable_graph();
  std::set<std::string> ops;
  for (const auto& n : graph.node())
    if (is_onnx_domain(n.domain())) ops.insert(n.op_type());
  if (opset > kNewestOpset)
    return invalid_argument(fmt::format(
        "the model uses opset {} of the ONNX operators, which tunefarm does not know yet (it reads opsets 1 to {}); "
        "the operators that need it: {}",
        opset, kNewestOpset, fmt::join(ops, ", ")));
  if (opset <= kLibraryOpset) return Status();
  // Every node first, so that the error names all of them.
  std::map<std::string, std::vector<std::string>> refused;  // Reason -> nodes.
  Rewriter rewriter(graph, opset);
  int index = 0;
  for (auto& n : *graph.mutable_node()) {
    ++index;
    std::string name = n.name().empty() ? fmt::format("{}_{}", n.op_type(), index) : n.name();
    std::string why = rewriter.rewrite(n);
    if (why.empty() && is_onnx_domain(n.domain()) && !onnx_schemas().GetSchema(n.op_type(), opset, ""))
      why = fmt::format("an operator of opset {} tunefarm does not know", opset);
    if (!why.empty()) refused[fmt::format("{} ({})", n.op_type(), why)].push_back(name);
  }
  if (refused.empty()) return Status();
  std::vector<std::string> parts;
  for (const auto& [why, nodes] : refused)
    parts.push_back(fmt::format("{}: node{} '{}'", why, nodes.size() > 1 ? "s" : "", fmt::join(nodes, "', '")));
  return invalid_argument(fmt::format("opset {} operators tunefarm cannot read: {}", opset, fmt::join(parts, "; ")));
}

Status check_onnx_model(const onnx::ModelProto& model) {
  try {
    if (model.ir_version() >= 3 && model.opset_import_size() == 0)
      return invalid_argument("not a valid ONNX model: it imports no opset");
    onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(static_cast<int>(std::min<int64_t>(model.ir_version(), kLibraryIrVersion)));
    std::unordered_map<std::string, int> opsets;
    for (const auto& o : model.opset_import()) opsets[o.domain()] = static_cast<int>(o.version());
    ctx.set_opset_imports(opsets);
    ctx.set_schema_registry(&onnx_schemas());
    onnx::checker::LexicalScopeContext scope;
    onnx::checker::check_graph(model.graph(), ctx, scope);
  } catch (const std::exception& e) {
    return invalid_argument("not a valid ONNX model: " + one_line(e.what()));
  }
  return Status();
}

}  // namespace tunefarm::model
