// A schedule config: the value of every knob of one template's config space, and its stable JSON
// form. The JSON form is what the history stores, what `tune-client best --json` prints and what
// `kernel_bench --config-file` reads, so later versions must keep reading it:
//
//   {"template":"matmul.cpu.blocked","knobs":{"tile_m":[-1,8,4],"unroll":"on","order":2}}
//
// Knobs keep their declaration order. A knob value is an integer, a string, or a list of integers
// (split factors, outermost first, or a permutation).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"

namespace tunefarm {

using KnobValue = std::variant<int64_t, std::string, std::vector<int64_t>>;

struct Config {
  std::string template_name;
  std::vector<std::pair<std::string, KnobValue>> knobs;

  // nullptr when the knob is absent.
  const KnobValue* find(std::string_view name) const;

  // The stable JSON form, on one line, knobs in declaration order.
  std::string to_json() const;

  bool operator==(const Config& other) const = default;
};

// Parses the stable JSON form. Errors name what is wrong (not an object, missing "template",
// a knob value of the wrong type, a repeated knob).
StatusOr<Config> parse_config_json(std::string_view json);

std::string knob_value_to_string(const KnobValue& value);

}  // namespace tunefarm
