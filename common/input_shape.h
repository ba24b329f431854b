// The --input-shape flag of model commands: NAME=d0,d1,... fixes the symbolic dimensions of a
// model's input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tunefarm {

// Parses "NAME=1,3,224,224"; each dimension 1..kMaxDimension.
StatusOr<std::pair<std::string, std::vector<int64_t>>> parse_input_shape(std::string_view text);

}  // namespace tunefarm
