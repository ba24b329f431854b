// Secrets that daemons check: agent, tuner, client and read-only tokens. Header-only so that the
// tracker and tunerd share it without another library; TLS settings will join it here.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tunefarm {

// Compares a presented token with a configured one without an early exit, so that the time taken
// does not tell how much of a guess was right.
inline bool same_secret(std::string_view presented, std::string_view expected) {
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < presented.size(); ++i)
    diff |= static_cast<unsigned char>(presented[i] ^ (expected.empty() ? 0 : expected[i % expected.size()]));
  return diff == 0 && !expected.empty();
}

inline bool any_secret(const std::vector<std::string>& expected, std::string_view presented) {
  bool found = false;
  for (const auto& e : expected) found |= same_secret(presented, e);
  return found;
}

// The token of an "authorization" metadata value "Bearer <token>"; empty when it has another form.
inline std::string_view bearer_token(std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) return {};
  return authorization.substr(kBearer.size());
}

}  // namespace tunefarm
