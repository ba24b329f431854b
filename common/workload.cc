#include "common/workload.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <cctype>
#include <map>
#include <optional>

#include <fmt/format.h>

namespace tunefarm {
namespace {

struct ParamSpec {
  const char* name;
  bool required;
  int64_t default_value;  // Used when not required and absent.
  int64_t min_value;
  int64_t max_value;
  bool print_default;     // Printed in the canonical form even when equal to its default.
};

struct OpSchema {
  const char* op;
  std::vector<ParamSpec> params;
  std::vector<DType> dtypes;
};

constexpr int64_t kMaxDim = kMaxDimension;

ParamSpec dim(const char* name) { return {name, true, 0, 1, kMaxDim, true}; }
ParamSpec flag(const char* name) { return {name, false, 0, 0, 1, false}; }

std::vector<ParamSpec> conv_params(bool depthwise, bool blocked = false) {
  std::vector<ParamSpec> p = {dim("N"), dim("C"), dim("H"), dim("W")};
  if (!depthwise) p.push_back(dim("K"));
  p.push_back(dim("R"));
  p.push_back(dim("S"));
  p.push_back({"stride", false, 1, 1, 64, true});
  p.push_back({"pad", false, 0, 0, 1024, true});
  p.push_back({"dilation", false, 1, 1, 64, false});
  if (blocked && depthwise) {
    // Channels per block of the activations (NCHW[block]c in and out) and of the packed weights.
    p.push_back({"block", true, 0, 1, 64, true});
  } else if (blocked) {
    // Channels per block of the activations (NCHW[ic]c in, NCHW[oc]c out) and of the packed weights.
    p.push_back({"ic_block", true, 0, 1, 64, true});
    p.push_back({"oc_block", true, 0, 1, 64, true});
  }
  if (blocked) {
    // Epilogues applied in the output stage, in this order: a bias per output channel, a residual
    // tensor of the output's shape and layout, then ReLU or ReLU6.
    for (const char* f : {"bias", "residual", "relu", "relu6"}) p.push_back(flag(f));
  }
  return p;
}

const std::vector<OpSchema>& schemas() {
  static const std::vector<OpSchema> kSchemas = {
      {"matmul", {dim("M"), dim("N"), dim("K")}, {DType::kFloat32}},
      {"dense", {dim("M"), dim("N"), dim("K"), flag("bias"), flag("relu")}, {DType::kFloat32}},
      {"batch_matmul", {dim("B"), dim("M"), dim("N"), dim("K")}, {DType::kFloat32}},
      {"conv2d_nchw", conv_params(false), {DType::kFloat32}},
      {"conv2d_nhwc", conv_params(false), {DType::kFloat32}},
      {"depthwise_conv2d_nchw", conv_params(true), {DType::kFloat32}},
      {"conv2d_nchwc", conv_params(false, true), {DType::kFloat32}},
      {"depthwise_conv2d_nchwc", conv_params(true, true), {DType::kFloat32}},
  };
  return kSchemas;
}

const OpSchema* find_schema(std::string_view op) {
  for (const auto& s : schemas())
    if (op == s.op) return &s;
  return nullptr;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return std::isalpha(static_cast<unsigned char>(s.front())) || s.front() == '_';
}

std::string ops_list() {
  std::string out;
  for (const auto& name : known_ops()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// Checks that do not fit a per-parameter range: output shapes and total sizes.
Status check_shapes(const Workload& w) {
  auto check_elems = [&](const char* tensor, std::initializer_list<int64_t> dims) -> Status {
    int64_t total = 1;
    for (int64_t d : dims) {
      if (total > kMaxTensorElements / d) total = kMaxTensorElements + 1;
      else total *= d;
    }
    if (total > kMaxTensorElements)
      return invalid_argument(fmt::format("tensor {} has more than {} elements", tensor, kMaxTensorElements));
    return Status();
  };
  const std::string& op = w.op;
  if (op == "matmul" || op == "dense") {
    int64_t M = w.param("M"), N = w.param("N"), K = w.param("K");
    TF_RETURN_IF_ERROR(check_elems("A", {M, K}));
    TF_RETURN_IF_ERROR(check_elems("B", {K, N}));
    return check_elems("C", {M, N});
  }
  if (op == "batch_matmul") {
    int64_t B = w.param("B"), M = w.param("M"), N = w.param("N"), K = w.param("K");
    TF_RETURN_IF_ERROR(check_elems("A", {B, M, K}));
    TF_RETURN_IF_ERROR(check_elems("B", {B, K, N}));
    return check_elems("C", {B, M, N});
  }
  // Convolutions.
  int64_t N = w.param("N"), C = w.param("C"), H = w.param("H"), W = w.param("W");
  int64_t R = w.param("R"), S = w.param("S");
  int64_t stride = w.param("stride"), pad = w.param("pad"), dil = w.param("dilation");
  int64_t K = w.has_param("K") ? w.param("K") : C;
  int64_t eff_r = dil * (R - 1) + 1, eff_s = dil * (S - 1) + 1;
  if (pad >= eff_r || pad >= eff_s)
    return invalid_argument(fmt::format("pad={} must be smaller than the dilated kernel ({}x{})", pad, eff_r, eff_s));
  if (H + 2 * pad < eff_r || W + 2 * pad < eff_s)
    return invalid_argument(fmt::format(
        "kernel {}x{} (dilated) is larger than the padded input {}x{}: the output would be empty", eff_r, eff_s,
        H + 2 * pad, W + 2 * pad));
  int64_t P = conv_output_extent(H, R, stride, pad, dil), Q = conv_output_extent(W, S, stride, pad, dil);
  if ((op == "conv2d_nchwc" || op == "depthwise_conv2d_nchwc") && w.param("relu") && w.param("relu6"))
    return invalid_argument("relu=1 and relu6=1 exclude each other");
  if (op == "depthwise_conv2d_nchwc" && C % w.param("block") != 0)
    return invalid_argument(fmt::format("C={} must be a multiple of block={}", C, w.param("block")));
  if (op == "conv2d_nchwc") {
    int64_t icb = w.param("ic_block"), ocb = w.param("oc_block");
    if (C % icb != 0 || K % ocb != 0)
      return invalid_argument(fmt::format("C={} and K={} must be multiples of ic_block={} and oc_block={}", C, K, icb, ocb));
  }
  TF_RETURN_IF_ERROR(check_elems("input", {N, C, H, W}));
  bool depthwise = op == "depthwise_conv2d_nchw" || op == "depthwise_conv2d_nchwc";
  TF_RETURN_IF_ERROR(check_elems("weight", {K, depthwise ? 1 : C, R, S}));
  return check_elems("output", {N, K, P, Q});
}

}  // namespace

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
    case DType::kInt8: return "int8";
    case DType::kInt32: return "int32";
    case DType::kUInt8: return "uint8";
  }
  return "unknown";
}

StatusOr<DType> parse_dtype(std::string_view name) {
  for (DType d : {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt8, DType::kInt32, DType::kUInt8})
    if (name == dtype_name(d)) return d;
  return invalid_argument(
      fmt::format("unknown dtype '{}' (known: float32, float16, float64, int8, int32, uint8)", name));
}

int dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: case DType::kInt32: return 4;
    case DType::kFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kInt8: case DType::kUInt8: return 1;
  }
  return 0;
}

int64_t Workload::param(std::string_view name) const {
  for (const auto& [n, v] : params)
    if (n == name) return v;
  return 0;
}

bool Workload::has_param(std::string_view name) const {
  return std::any_of(params.begin(), params.end(), [&](const auto& p) { return p.first == name; });
}

std::string Workload::to_string() const {
  std::string out = op + ":";
  const OpSchema* schema = find_schema(op);
  bool first = true;
  for (const auto& [name, value] : params) {
    if (schema) {
      auto it = std::find_if(schema->params.begin(), schema->params.end(),
                             [&n = name](const ParamSpec& p) { return n == p.name; });
      if (it != schema->params.end() && !it->required && !it->print_default && value == it->default_value) continue;
    }
    out += fmt::format("{}{}={}", first ? "" : ",", name, value);
    first = false;
  }
  if (dtype != DType::kFloat32) out += fmt::format("{}dtype={}", first ? "" : ",", dtype_name(dtype));
  return out;
}

int64_t reduction_length(const Workload& w) {
  if (w.op == "depthwise_conv2d_nchw" || w.op == "depthwise_conv2d_nchwc") return w.param("R") * w.param("S");
  if (w.op == "conv2d_nchw" || w.op == "conv2d_nhwc" || w.op == "conv2d_nchwc")
    return w.param("C") * w.param("R") * w.param("S");
  if (w.op == "matmul" || w.op == "dense" || w.op == "batch_matmul") return w.param("K");
  return 1;
}

std::vector<std::string> known_ops() {
  std::vector<std::string> out;
  for (const auto& s : schemas()) out.push_back(s.op);
  std::sort(out.begin(), out.end());
  return out;
}

StatusOr<Workload> parse_workload(std::string_view text) {
  std::string_view s = trim(text);
  auto fail = [&](const std::string& why) {
    return invalid_argument(fmt::format("workload '{}': {}", text, why));
  };
  if (s.empty()) return fail("empty workload string (expected OP:NAME=VALUE,...)");
  size_t colon = s.find(':');
  if (colon == std::string_view::npos)
    return fail("missing ':' after the operator name (expected OP:NAME=VALUE,...)");
  std::string_view op = s.substr(0, colon);
  if (op.empty()) return fail("missing operator name before ':'");
  const OpSchema* schema = find_schema(op);
  if (!schema) return fail(fmt::format("unknown operator '{}' (known: {})", op, ops_list()));

  std::string_view rest = s.substr(colon + 1);
  if (trim(rest).empty()) return fail(fmt::format("no parameters given for {}", op));

  std::map<std::string, int64_t, std::less<>> given;
  std::optional<DType> dtype;
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t comma = rest.find(',', pos);
    std::string_view item = trim(rest.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    pos = comma == std::string_view::npos ? rest.size() + 1 : comma + 1;
    if (item.empty()) return fail("empty parameter (a stray or doubled ',')");
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) return fail(fmt::format("parameter '{}' has no '=VALUE'", item));
    std::string_view name = trim(item.substr(0, eq));
    std::string_view value = trim(item.substr(eq + 1));
    if (name.empty()) return fail(fmt::format("parameter '{}' has no name before '='", item));
    if (!is_identifier(name)) return fail(fmt::format("parameter name '{}' is not an identifier", name));
    if (value.empty()) return fail(fmt::format("parameter {} has no value after '='", name));
    if (name == "dtype") {
      if (dtype) return fail("parameter dtype is given twice");
      auto parsed = parse_dtype(value);
      if (!parsed.ok()) return fail(parsed.status().message());
      dtype = *parsed;
      continue;
    }
    auto spec = std::find_if(schema->params.begin(), schema->params.end(),
                             [&](const ParamSpec& p) { return name == p.name; });
    if (spec == schema->params.end()) {
      std::string names;
      for (const auto& p : schema->params) names += (names.empty() ? "" : ", ") + std::string(p.name);
      return fail(fmt::format("unknown parameter '{}' for {} (parameters: {}, dtype)", name, op, names));
    }
    if (given.count(name)) return fail(fmt::format("parameter {} is given twice", name));
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec == std::errc::result_out_of_range)
      return fail(fmt::format("parameter {}={} is out of range (at most {})", name, value, spec->max_value));
    if (ec != std::errc() || ptr != value.data() + value.size())
      return fail(fmt::format("parameter {}='{}' is not an integer", name, value));
    if (v < spec->min_value || v > spec->max_value)
      return fail(fmt::format("parameter {}={} is out of range [{}, {}]", name, v, spec->min_value, spec->max_value));
    given.emplace(std::string(name), v);
  }

  Workload w;
  w.op = std::string(op);
  w.dtype = dtype.value_or(DType::kFloat32);
  for (const auto& p : schema->params) {
    auto it = given.find(p.name);
    if (it != given.end()) {
      w.params.emplace_back(p.name, it->second);
    } else if (p.required) {
      return fail(fmt::format("missing required parameter {} for {}", p.name, op));
    } else {
      w.params.emplace_back(p.name, p.default_value);
    }
  }
  if (std::find(schema->dtypes.begin(), schema->dtypes.end(), w.dtype) == schema->dtypes.end())
    return fail(fmt::format("dtype {} is not supported by {} (supported: float32)", dtype_name(w.dtype), op));
  Status shapes = check_shapes(w);
  if (!shapes.ok()) return fail(shapes.message());
  return w;
}

Status validate_workload(const Workload& workload) {
  // The canonical form prints every parameter that was given (repeats and unknown names included),
  // so parsing it applies exactly the parser's rules to a workload built in code.
  return parse_workload(workload.to_string()).status();
}

StatusOr<std::vector<Workload>> read_workload_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found(fmt::format("cannot open workload file '{}'", path));
  std::vector<Workload> out;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    std::string_view view = line;
    if (size_t hash = view.find('#'); hash != std::string_view::npos) view = view.substr(0, hash);
    view = trim(view);
    if (view.empty()) continue;
    auto w = parse_workload(view);
    if (!w.ok()) return w.status().with_context(fmt::format("{}:{}", path, lineno));
    out.push_back(std::move(*w));
  }
  if (out.empty()) return invalid_argument(fmt::format("workload file '{}' holds no workloads", path));
  return out;
}

}  // namespace tunefarm
