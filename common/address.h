// Listening and dialing addresses ("127.0.0.1:9190", "[::1]:9191", "localhost:9190",
// "unix:/path"): which ones stay on this machine. A daemon that would listen beyond loopback
// without TLS and tokens refuses to start unless told --insecure.
#pragma once

#include <string_view>

namespace tunefarm {

bool is_loopback_address(std::string_view address);

}  // namespace tunefarm
