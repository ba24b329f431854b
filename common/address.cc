#include "common/address.h"

namespace tunefarm {

bool is_loopback_address(std::string_view address) {
  return address.starts_with("127.") || address.starts_with("localhost:") || address.starts_with("[::1]:") ||
         address.starts_with("unix:");
}

}  // namespace tunefarm
