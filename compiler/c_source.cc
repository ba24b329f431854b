#include "compiler/c_source.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace tunefarm::c_source {

// Embedded at build time (library_c/library_sources.cc.in).
extern const char kErrorCodes[];

std::string upper(std::string_view name) {
  std::string out(name);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string string_literal(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') out += fmt::format("\\{}", static_cast<char>(c));
    else if (c == '\n') out += "\\n\"\n    \"";
    else if (c < 0x20 || c >= 0x7f) out += fmt::format("\\{:03o}", c);
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

namespace {

// "libname" and "LIBNAME" replaced in one pass, so that a name holding either stays as it is.
std::string with_name(std::string_view fixed, const std::string& name) {
  std::string upper_name = upper(name), out;
  size_t pos = 0;
  for (;;) {
    size_t lower_at = fixed.find("libname", pos), upper_at = fixed.find("LIBNAME", pos);
    size_t at = std::min(lower_at, upper_at);
    if (at == std::string_view::npos) break;
    out += fixed.substr(pos, at - pos);
    out += at == lower_at ? name : upper_name;
    pos = at + 7;
  }
  out += fixed.substr(pos);
  return out;
}

}  // namespace

std::string error_codes(const std::string& name) {
  std::string codes = with_name(kErrorCodes, name);
  if (!codes.empty() && codes.back() == '\n') codes.pop_back();
  return codes;
}

std::string instantiate(std::string_view fixed, const std::string& name, const std::vector<Table>& tables) {
  std::string text = with_name(fixed, name);
  std::vector<Table> all = tables;
  all.push_back({"ERROR_CODES", error_codes(name)});
  // One pass over the fixed text: the tables' own text is never searched for markers.
  std::string out;
  size_t pos = 0;
  for (;;) {
    size_t at = text.find("{{", pos);
    size_t end = at == std::string::npos ? at : text.find("}}", at + 2);
    if (end == std::string::npos) break;
    std::string_view slot = std::string_view(text).substr(at + 2, end - at - 2);
    const Table* table = nullptr;
    for (const Table& t : all)
      if (t.slot == slot) table = &t;
    if (!table) {
      out += text.substr(pos, at + 2 - pos);
      pos = at + 2;
      continue;
    }
    size_t from = at, to = end + 2;
    if (from >= pos + 3 && text.compare(from - 3, 3, "/* ") == 0 && text.compare(to, 3, " */") == 0) {
      from -= 3;
      to += 3;
    }
    out += text.substr(pos, from - pos);
    out += table->text;
    pos = to;
  }
  out += text.substr(pos);
  return out;
}

}  // namespace tunefarm::c_source
