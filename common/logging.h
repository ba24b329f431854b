// Logging setup shared by every program: spdlog to stderr, level from a flag or from the
// TUNEFARM_LOG_LEVEL environment variable (the flag wins).
#pragma once

#include <string_view>

#include "common/status.h"

namespace tunefarm {

// Accepts trace, debug, info, warn, error, critical, off. An empty level means: use
// TUNEFARM_LOG_LEVEL if set, else "info". `program` prefixes every line.
Status setup_logging(std::string_view program, std::string_view level);

}  // namespace tunefarm
