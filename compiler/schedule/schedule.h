// Schedules: how the loops of each compute stage are arranged, without changing what is computed.
// The primitives are TVM's: split (a non-dividing factor leaves a tail that lowering handles),
// reorder, fuse, vectorize, unroll, parallel, bind (GPU block/thread indices), compute_at,
// cache_write (local accumulators), cache_read (a staged copy, e.g. in GPU shared memory).
//
// Misuse (an axis that is not a leaf of the stage, a zero factor, ...) does not throw: the schedule
// remembers the first error and lowering returns it, so a template can apply a whole config and
// check once.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "compiler/ir/ir.h"
#include "compiler/te/tensor.h"

namespace tunefarm::schedule {

using te::IterVar;
using te::Tensor;

struct Relation {
  enum class Kind { kSplit, kFuse };
  Kind kind;
  IterVar parent, outer, inner;  // Split: parent -> (outer, inner).
  IterVar fused;                 // Fuse: (outer, inner) -> fused.
  int64_t factor = 0;
};

struct Annotation {
  ir::ForKind kind = ir::ForKind::kSerial;
  std::string thread_tag;
};

class Schedule;

class Stage {
 public:
  Stage(Schedule* sched, te::Operation op);

  const te::Operation& op() const { return op_; }
  // Spatial root axes followed by reduction root axes.
  std::vector<IterVar> root_iter_vars() const;
  const std::vector<IterVar>& leaf_iter_vars() const { return leaves_; }
  const std::vector<Relation>& relations() const { return relations_; }
  Annotation annotation(const IterVar& iv) const;
  const IterVar& axis(size_t i) const { return op_->axes.at(i); }
  const IterVar& reduce_axis(size_t i) const { return op_->reduce_axes.at(i); }

  // Splits `iv` into (outer, inner) with inner extent `factor`.
  std::pair<IterVar, IterVar> split(const IterVar& iv, int64_t factor);
  // Splits by the number of outer iterations instead.
  std::pair<IterVar, IterVar> split_nparts(const IterVar& iv, int64_t nparts);
  IterVar fuse(const IterVar& outer, const IterVar& inner);
  // The given leaves take the positions that they occupy together, in the given order.
  void reorder(const std::vector<IterVar>& order);
  void vectorize(const IterVar& iv) { annotate(iv, ir::ForKind::kVectorized, ""); }
  void unroll(const IterVar& iv) { annotate(iv, ir::ForKind::kUnrolled, ""); }
  void parallel(const IterVar& iv) { annotate(iv, ir::ForKind::kParallel, ""); }
  // Binds to "blockIdx.x/y/z" or "threadIdx.x/y/z".
  void bind(const IterVar& iv, const std::string& tag);
  void compute_at(Stage& parent, const IterVar& iv);
  void set_scope(ir::MemScope scope) { scope_ = scope; }

  bool attached() const { return attach_stage_ != nullptr; }
  Stage* attach_stage() const { return attach_stage_; }
  const IterVar& attach_iv() const { return attach_iv_; }
  // kGlobal means "decided by lowering" for intermediate stages.
  ir::MemScope scope() const { return scope_; }

 private:
  friend class Schedule;
  bool is_leaf(const IterVar& iv) const;
  void annotate(const IterVar& iv, ir::ForKind kind, std::string tag);

  Schedule* sched_;
  te::Operation op_;
  std::vector<IterVar> leaves_;
  std::vector<Relation> relations_;
  std::unordered_map<const te::IterVarNode*, Annotation> annotations_;
  Stage* attach_stage_ = nullptr;
  IterVar attach_iv_;
  ir::MemScope scope_ = ir::MemScope::kGlobal;
};

class Schedule {
 public:
  // The stages of every operation the outputs depend on, producers before consumers.
  explicit Schedule(const std::vector<Tensor>& outputs);
  Schedule(const Schedule&) = delete;
  Schedule& operator=(const Schedule&) = delete;

  Stage& operator[](const Tensor& t);
  Stage* find(const te::OperationNode* op);
  const std::vector<std::unique_ptr<Stage>>& stages() const { return stages_; }
  bool is_output(const te::OperationNode* op) const;

  // Moves the computation of `t` into a new stage writing a buffer in `scope`; `t` becomes a copy
  // of it. The returned tensor is the new stage (schedule it, compute_at it inside t's loops).
  Tensor cache_write(const Tensor& t, ir::MemScope scope);
  // A new stage copying `t` into `scope`; `readers` read the copy instead of `t`.
  Tensor cache_read(const Tensor& t, ir::MemScope scope, const std::vector<Tensor>& readers);

  const Status& status() const { return status_; }
  void fail(std::string message);

 private:
  void insert_before(const te::OperationNode* consumer, te::Operation op);

  std::vector<Tensor> outputs_;
  std::vector<std::unique_ptr<Stage>> stages_;
  Status status_;
};

}  // namespace tunefarm::schedule
