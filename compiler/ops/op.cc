#include "compiler/ops/op.h"

#include "compiler/lower/lower.h"
#include "compiler/schedule/schedule.h"

namespace tunefarm::ops {

const std::vector<OpDef>& op_library() {
  static const std::vector<OpDef> kOps = [] {
    std::vector<OpDef> ops = gemm_ops();
    for (auto& op : conv_ops()) ops.push_back(std::move(op));
    return ops;
  }();
  return kOps;
}

const OpDef* find_op(std::string_view name) {
  for (const auto& op : op_library())
    if (op.name == name) return &op;
  return nullptr;
}

const Template* find_template(const OpDef& op, std::string_view name) {
  for (const auto& t : op.templates)
    if (t.name == name) return &t;
  return nullptr;
}

const Template* default_template(const OpDef& op, const Target& target, const Workload& workload) {
  const Template* first = nullptr;
  for (const auto& t : op.templates) {
    if (t.target_kind != target.kind) continue;
    if (!first) first = &t;
    if (t.preferred && t.preferred(workload)) return &t;
  }
  return first;
}

StatusOr<ir::LoweredFunc> build_naive(const ComputeDef& def, const std::string& entry) {
  schedule::Schedule s({def.output});
  return lower::lower(s, def.args(), entry);
}

}  // namespace tunefarm::ops
