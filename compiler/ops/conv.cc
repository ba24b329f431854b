#include "compiler/ops/op.h"

namespace tunefarm::ops {

std::vector<OpDef> conv_ops() { return {}; }

}  // namespace tunefarm::ops
