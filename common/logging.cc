#include "common/logging.h"

#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <spdlog/formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace tunefarm {

std::string json_string(std::string_view text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04x}", c);
      continue;
    }
    if (c < 0x80) {
      out += static_cast<char>(c);
      continue;
    }
    // A well-formed UTF-8 sequence passes as it is; any other byte becomes U+FFFD, since a shipper
    // rejects the whole line for one bad byte.
    size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    bool valid = len > 0 && i + len <= text.size();
    for (size_t k = 1; valid && k < len; ++k) valid = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
    if (!valid) {
      out += "\\ufffd";
      continue;
    }
    out.append(text.substr(i, len));
    i += len - 1;
  }
  out += '"';
  return out;
}

namespace {

// One JSON object per line, with the fields log shippers index on.
class JsonFormatter final : public spdlog::formatter {
 public:
  explicit JsonFormatter(std::string program) : program_(json_string(program)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    auto since_epoch = msg.time.time_since_epoch();
    auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    auto micros = std::chrono::duration_cast<std::chrono::microseconds>(since_epoch - seconds).count();
    std::time_t t = seconds.count();
    std::tm utc{};
    gmtime_r(&t, &utc);
    auto level = spdlog::level::to_string_view(msg.level);
    fmt::format_to(std::back_inserter(dest),
                   "{{\"ts\":\"{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z\",\"level\":\"{}\",\"program\":{},"
                   "\"pid\":{},\"thread\":{},\"msg\":{}}}\n",
                   utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, micros,
                   std::string_view(level.data(), level.size()), program_, pid_, msg.thread_id,
                   json_string(std::string_view(msg.payload.data(), msg.payload.size())));
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    auto copy = std::make_unique<JsonFormatter>("");
    copy->program_ = program_;
    return copy;
  }

 private:
  std::string program_;
  int pid_ = static_cast<int>(getpid());
};

}  // namespace

Status setup_logging(std::string_view program, std::string_view level, std::string_view format) {
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
  if (format != "text" && format != "json")
    return invalid_argument(fmt::format("unknown log format '{}' (use text or json)", format));
  std::string name(program);
  spdlog::drop(name);
  // JSON lines go to shippers, not terminals: no colour codes inside them.
  auto logger = format == "json" ? spdlog::stderr_logger_mt(name) : spdlog::stderr_color_mt(name);
  if (format == "json")
    logger->set_formatter(std::make_unique<JsonFormatter>(name));
  else
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %n %^%l%$ %v");
  logger->set_level(parsed);
  spdlog::set_default_logger(logger);
  return Status();
}

}  // namespace tunefarm
