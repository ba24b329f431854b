#include "common/input_shape.h"

#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "common/workload.h"

namespace tunefarm {

StatusOr<std::pair<std::string, std::vector<int64_t>>> parse_input_shape(std::string_view text) {
  auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return invalid_argument(fmt::format("--input-shape '{}': expected NAME=d0,d1,... (e.g. input=1,3,224,224)", text));
  std::pair<std::string, std::vector<int64_t>> out{std::string(text.substr(0, eq)), {}};
  std::stringstream dims{std::string(text.substr(eq + 1))};
  std::string d;
  while (std::getline(dims, d, ',')) {
    char* end = nullptr;
    long long v = std::strtoll(d.c_str(), &end, 10);
    if (d.empty() || *end != '\0' || v <= 0 || v > kMaxDimension)
      return invalid_argument(
          fmt::format("--input-shape '{}': '{}' is not a dimension (1..{})", text, d, kMaxDimension));
    out.second.push_back(v);
  }
  if (out.second.empty()) return invalid_argument(fmt::format("--input-shape '{}' gives no dimensions", text));
  return out;
}

}  // namespace tunefarm
