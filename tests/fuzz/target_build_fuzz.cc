// libFuzzer target for target strings all the way into code generation: whatever a client may send
// as a target either is refused by the parser or by codegen::check_target with an error, or builds
// a small kernel. LLVM aborts the process on targets it cannot handle, so an abort here is a
// target that could take tunerd down.
#include <cstdint>
#include <string_view>

#include "common/target.h"
#include "common/workload.h"
#include "compiler/build.h"
#include "compiler/codegen/codegen.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tunefarm::Workload workload = *tunefarm::parse_workload("matmul:M=4,N=4,K=4");
  auto target = tunefarm::parse_target(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!target.ok()) return 0;
  if (!tunefarm::codegen::check_target(*target).ok()) return 0;
  auto config = tunefarm::default_config(workload, *target);
  if (!config.ok()) return 0;
  (void)tunefarm::build_kernel(workload, *target, *config);
  return 0;
}
