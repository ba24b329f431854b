#include "client/output.h"

#include "client/command.h"
#include "common/wire/credentials.h"

#include <cctype>
#include <cmath>

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

namespace tunefarm::client {

bool json_errors = false;

int fail(const std::string& message) {
  fmt::print(stderr, "tune-client: {}\n", message);
  // A script that asked for JSON reads its stdout: the failure comes as a JSON object there too.
  if (json_errors) fmt::print("{}\n", nlohmann::json{{"error", message}}.dump());
  return 1;
}

int rpc_failure(const std::string& address, const std::string& what, const grpc::Status& status) {
  return fail(rpc_failure_message(address, what, status));
}

bool channel_failure(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
  const std::string& message = status.error_message();
  return message.rfind("failed to connect", 0) == 0 || message.rfind("Socket closed", 0) == 0 ||
         message.rfind("Connection reset", 0) == 0 || message.rfind("DNS resolution failed", 0) == 0 ||
         message.find("handshake") != std::string::npos;
}

std::string rpc_failure_message(const std::string& address, const std::string& what, const grpc::Status& status) {
  if (!channel_failure(status)) return fmt::format("{}: {}", what, status.error_message());
  const std::string& message = status.error_message();
  std::string hint = unreachable_hint(message, "--tls-ca");
  return fmt::format("{}: cannot reach {} ({}){}", what, address, message, hint);
}

std::string to_json(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  // Printing a well-formed message cannot fail; an empty object is the safe answer if it did.
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return "{}";
  return json;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 120) return fmt::format("{:.0f}s", seconds);
  if (seconds < 7200) return fmt::format("{:.0f}m", seconds / 60);
  return fmt::format("{:.1f}h", seconds / 3600);
}

StatusOr<double> parse_duration(const std::string& text) {
  auto bad = [&] {
    return invalid_argument(fmt::format("duration '{}' must look like 90s, 10m, 1h or 1h30m", text));
  };
  if (text.empty()) return bad();
  double total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    if (i == start) return bad();
    double value = std::stod(text.substr(start, i - start));
    double unit = 1;
    if (i < text.size()) {
      switch (text[i]) {
        case 's': unit = 1; break;
        case 'm': unit = 60; break;
        case 'h': unit = 3600; break;
        case 'd': unit = 86400; break;
        default: return bad();
      }
      ++i;
    } else if (start == 0) {
      // "3" could be seconds or minutes: the unit is always written.
      return invalid_argument(fmt::format("duration '{}' needs a unit: {}s, {}m or {}h", text, text, text, text));
    } else {
      return bad();  // "1h30" is ambiguous.
    }
    total += value * unit;
  }
  return total;
}

}  // namespace tunefarm::client
