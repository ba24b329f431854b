#include "common/workload.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <cctype>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "common/operators/operator.h"

namespace tunefarm {
namespace {

using operators::Operator;
using operators::ParamSpec;

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

// The operator's own checks, then every tensor's size.
Status check_shapes(const Operator& op, const Workload& w) {
  TF_RETURN_IF_ERROR(op.check(w));
  for (const auto& arg : op.args(w)) {
    int64_t total = 1;
    for (int64_t d : arg.shape) {
      if (total > kMaxTensorElements / d) total = kMaxTensorElements + 1;
      else total *= d;
    }
    if (total > kMaxTensorElements)
      return invalid_argument(fmt::format("tensor {} has more than {} elements", arg.name, kMaxTensorElements));
  }
  return Status();
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
  const Operator* desc = operators::find_operator(op);
  bool first = true;
  for (const auto& [name, value] : params) {
    if (desc) {
      auto it = std::find_if(desc->params.begin(), desc->params.end(),
                             [&n = name](const ParamSpec& p) { return n == p.name; });
      if (it != desc->params.end() && !it->required && !it->print_default && value == it->default_value) continue;
    }
    out += fmt::format("{}{}={}", first ? "" : ",", name, value);
    first = false;
  }
  if (dtype != DType::kFloat32) out += fmt::format("{}dtype={}", first ? "" : ",", dtype_name(dtype));
  return out;
}

int64_t reduction_length(const Workload& w) {
  const Operator* op = operators::find_operator(w.op);
  return op ? op->reduction_length(w) : 1;
}

std::vector<std::string> known_ops() {
  std::vector<std::string> out;
  for (const auto& op : operators::all_operators()) out.push_back(op.name);
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
  const Operator* desc = operators::find_operator(op);
  if (!desc) return fail(fmt::format("unknown operator '{}' (known: {})", op, ops_list()));

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
    auto spec = std::find_if(desc->params.begin(), desc->params.end(),
                             [&](const ParamSpec& p) { return name == p.name; });
    if (spec == desc->params.end()) {
      std::string names;
      for (const auto& p : desc->params) names += (names.empty() ? "" : ", ") + std::string(p.name);
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
  for (const auto& p : desc->params) {
    auto it = given.find(p.name);
    if (it != given.end()) {
      w.params.emplace_back(p.name, it->second);
    } else if (p.required) {
      return fail(fmt::format("missing required parameter {} for {}", p.name, op));
    } else {
      w.params.emplace_back(p.name, p.default_value);
    }
  }
  if (std::find(desc->dtypes.begin(), desc->dtypes.end(), w.dtype) == desc->dtypes.end())
    return fail(fmt::format("dtype {} is not supported by {} (supported: float32)", dtype_name(w.dtype), op));
  Status shapes = check_shapes(*desc, w);
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
