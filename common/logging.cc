#include "common/logging.h"

#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace tunefarm {

Status setup_logging(std::string_view program, std::string_view level) {
  std::string chosen(level);
  if (chosen.empty()) {
    const char* env = std::getenv("TUNEFARM_LOG_LEVEL");
    chosen = env && *env ? env : "info";
  }
  auto parsed = spdlog::level::from_str(chosen);
  // from_str maps anything unknown to "off"; only "off" itself may mean off.
  if (parsed == spdlog::level::off && chosen != "off")
    return invalid_argument(
        fmt::format("unknown log level '{}' (use trace, debug, info, warn, error, critical or off)", chosen));
  auto logger = spdlog::stderr_color_mt(std::string(program));
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %n %^%l%$ %v");
  logger->set_level(parsed);
  spdlog::set_default_logger(logger);
  return Status();
}

}  // namespace tunefarm
