#include "compiler/lower/lower.h"

#include "compiler/lower/bound_inference.h"
#include "compiler/lower/gpu_barriers.h"
#include "compiler/lower/loop_nest.h"
#include "compiler/lower/loop_partition.h"
#include "compiler/lower/simplify.h"
#include "compiler/lower/storage_plan.h"
#include "compiler/lower/storage_flatten.h"
#include "compiler/lower/unroll.h"
#include "compiler/lower/vectorize.h"

namespace tunefarm::lower {

StatusOr<ir::LoopNest> lower_loops(const schedule::Schedule& sched, const std::vector<te::Tensor>& args,
                                   const std::string& name) {
  TF_ASSIGN_OR_RETURN(Bounds bounds, infer_bounds(sched));
  TF_ASSIGN_OR_RETURN(StoragePlan plan, plan_storage(sched, bounds, args));
  TF_ASSIGN_OR_RETURN(ir::LoweredFunc f, build_loop_nest(sched, bounds, plan, args, name));
  f.body = simplify(insert_gpu_barriers(storage_flatten(f.body)));
  return ir::LoopNest{std::move(f)};
}

ir::LoweredFunc finish_lowering(ir::LoopNest loops) {
  ir::LoweredFunc f = std::move(loops.func);
  ir::Stmt s = loop_partition(f.body);
  s = unroll_loops(s);
  s = vectorize_loops(s);
  f.body = simplify(s);
  return f;
}

StatusOr<ir::LoweredFunc> lower(const schedule::Schedule& sched, const std::vector<te::Tensor>& args,
                                const std::string& name) {
  TF_ASSIGN_OR_RETURN(ir::LoopNest loops, lower_loops(sched, args, name));
  return finish_lowering(std::move(loops));
}

}  // namespace tunefarm::lower
