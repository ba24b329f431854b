// libFuzzer targets for the text parsers every program shares (common/): workload strings, target
// strings and config JSON. Beyond "no crash", each checks the canonical form: whatever a parser
// accepts prints to a string that parses back to the same value.
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string_view>

#include "common/config.h"
#include "common/target.h"
#include "common/workload.h"

namespace {

[[noreturn]] void mismatch(const char* what, const std::string& printed) {
  std::fprintf(stderr, "%s: canonical form does not round-trip: %s\n", what, printed.c_str());
  std::abort();
}

std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace

#if defined(TUNEFARM_FUZZ_WORKLOAD)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto workload = tunefarm::parse_workload(as_text(data, size));
  if (!workload.ok()) return 0;
  if (!tunefarm::validate_workload(*workload).ok()) mismatch("workload (validate)", workload->to_string());
  std::string printed = workload->to_string();
  auto again = tunefarm::parse_workload(printed);
  if (!again.ok() || !(*again == *workload)) mismatch("workload", printed);
  return 0;
}
#elif defined(TUNEFARM_FUZZ_TARGET)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto target = tunefarm::parse_target(as_text(data, size));
  if (!target.ok()) return 0;
  std::string printed = target->to_string();
  auto again = tunefarm::parse_target(printed);
  if (!again.ok() || !(*again == *target)) mismatch("target", printed);
  return 0;
}
#elif defined(TUNEFARM_FUZZ_CONFIG)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto config = tunefarm::parse_config_json(as_text(data, size));
  if (!config.ok()) return 0;
  std::string printed = config->to_json();
  auto again = tunefarm::parse_config_json(printed);
  if (!again.ok() || !(*again == *config)) mismatch("config", printed);
  return 0;
}
#else
#error "define one of TUNEFARM_FUZZ_WORKLOAD, TUNEFARM_FUZZ_TARGET, TUNEFARM_FUZZ_CONFIG"
#endif
