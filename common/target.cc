#include "common/target.h"

#include <cctype>
#include <charconv>
#include <vector>

#include <fmt/format.h>

namespace tunefarm {
namespace {

std::vector<std::string_view> split_spaces(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

bool valid_value_chars(std::string_view v) {
  for (char c : v)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '+' || c == ','))
      return false;
  return true;
}

}  // namespace

std::string Target::to_string() const {
  std::string out = kind == Kind::kCUDA ? "cuda" : "llvm";
  if (!mtriple.empty()) out += " -mtriple=" + mtriple;
  if (!mcpu.empty()) out += " -mcpu=" + mcpu;
  if (!mattr.empty()) out += " -mattr=" + mattr;
  if (!arch.empty()) out += " -arch=" + arch;
  return out;
}

StatusOr<Target> parse_target(std::string_view text) {
  if (text.size() > kMaxTargetLength)
    return invalid_argument(fmt::format("target of {} bytes is longer than the {} allowed", text.size(), kMaxTargetLength));
  auto fail = [&](const std::string& why) { return invalid_argument(fmt::format("target '{}': {}", text, why)); };
  auto words = split_spaces(text);
  if (words.empty()) return fail("empty target (expected 'llvm' or 'cuda', with options)");
  Target t;
  if (words[0] == "llvm") t.kind = Target::Kind::kLLVM;
  else if (words[0] == "cuda") t.kind = Target::Kind::kCUDA;
  else return fail(fmt::format("unknown target kind '{}' (known: llvm, cuda)", words[0]));

  for (size_t i = 1; i < words.size(); ++i) {
    std::string_view w = words[i];
    if (w.size() < 2 || w[0] != '-') return fail(fmt::format("option '{}' must look like -name=value", w));
    size_t eq = w.find('=');
    if (eq == std::string_view::npos) return fail(fmt::format("option '{}' has no '=value'", w));
    std::string_view name = w.substr(1, eq - 1), value = w.substr(eq + 1);
    if (value.empty()) return fail(fmt::format("option -{} has an empty value", name));
    if (!valid_value_chars(value)) return fail(fmt::format("option -{} has invalid characters in '{}'", name, value));
    std::string* slot = nullptr;
    if (t.kind == Target::Kind::kLLVM) {
      if (name == "mtriple") slot = &t.mtriple;
      else if (name == "mcpu") slot = &t.mcpu;
      else if (name == "mattr") slot = &t.mattr;
    } else {
      if (name == "arch") slot = &t.arch;
    }
    if (!slot)
      return fail(fmt::format("unknown option -{} for {} (known: {})", name, words[0],
                              t.kind == Target::Kind::kLLVM ? "-mtriple, -mcpu, -mattr" : "-arch"));
    if (!slot->empty()) return fail(fmt::format("option -{} is given twice", name));
    *slot = std::string(value);
  }
  if (t.kind == Target::Kind::kCUDA) {
    if (t.arch.empty()) t.arch = "sm_75";
    int sm = 0;
    std::string_view a = t.arch;
    bool ok = a.substr(0, 3) == "sm_";
    if (ok) {
      auto [p, ec] = std::from_chars(a.data() + 3, a.data() + a.size(), sm);
      ok = ec == std::errc() && p == a.data() + a.size();
    }
    if (!ok) return fail(fmt::format("CUDA arch '{}' must look like sm_NN", t.arch));
    if (sm < 75 || sm > 90) return fail(fmt::format("CUDA arch {} is not supported (sm_75 to sm_90)", t.arch));
  }
  return t;
}

}  // namespace tunefarm
