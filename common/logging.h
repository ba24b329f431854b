// Logging setup shared by every program: spdlog to stderr, level from a flag or from the
// TUNEFARM_LOG_LEVEL environment variable (the flag wins), as lines for people or, for log
// shippers, one JSON object per line.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace tunefarm {

// Accepts trace, debug, info, warn, error, critical, off. An empty level means: use
// TUNEFARM_LOG_LEVEL if set, else "info". `program` prefixes every line. `format` is "text" or
// "json": {"ts":"2024-05-01T12:00:00.123456Z","level":"info","program":"tunerd","pid":1,"thread":2,"msg":"..."}.
Status setup_logging(std::string_view program, std::string_view level, std::string_view format = "text");

// `text` as a JSON string literal, quotes included (control characters and invalid UTF-8 escaped,
// so that any log message stays one valid line).
std::string json_string(std::string_view text);

}  // namespace tunefarm
