#include "compiler/schedule/schedule.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

#include <fmt/format.h>

#include "compiler/ir/visitor.h"

namespace tunefarm::schedule {

Stage::Stage(Schedule* sched, te::Operation op) : sched_(sched), op_(std::move(op)) { leaves_ = root_iter_vars(); }

std::vector<IterVar> Stage::root_iter_vars() const {
  std::vector<IterVar> out = op_->axes;
  out.insert(out.end(), op_->reduce_axes.begin(), op_->reduce_axes.end());
  return out;
}

Annotation Stage::annotation(const IterVar& iv) const {
  auto it = annotations_.find(iv.get());
  return it == annotations_.end() ? Annotation{} : it->second;
}

bool Stage::is_leaf(const IterVar& iv) const {
  if (iv && std::find(leaves_.begin(), leaves_.end(), iv) != leaves_.end()) return true;
  sched_->fail(fmt::format("stage {}: axis {} is not a leaf axis of this stage", op_->name, iv ? iv->var->name : "<null>"));
  return false;
}

std::pair<IterVar, IterVar> Stage::split(const IterVar& iv, int64_t factor) {
  auto outer = te::make_iter_var(iv ? iv->var->name + ".o" : "o", 0, iv && iv->is_reduce);
  auto inner = te::make_iter_var(iv ? iv->var->name + ".i" : "i", 0, iv && iv->is_reduce);
  if (!is_leaf(iv)) return {outer, inner};
  if (factor < 1) {
    sched_->fail(fmt::format("stage {}: split of {} by factor {}: the factor must be positive", op_->name, iv->var->name, factor));
    return {outer, inner};
  }
  relations_.push_back({Relation::Kind::kSplit, iv, outer, inner, nullptr, factor});
  auto it = std::find(leaves_.begin(), leaves_.end(), iv);
  *it = inner;
  leaves_.insert(it, outer);
  return {outer, inner};
}

std::pair<IterVar, IterVar> Stage::split_nparts(const IterVar& iv, int64_t nparts) {
  // Only root extents are known before bound inference; derived axes are split by factor.
  if (iv && iv->extent > 0 && nparts > 0) return split(iv, (iv->extent + nparts - 1) / nparts);
  sched_->fail(fmt::format("stage {}: split_nparts needs a root axis and a positive count", op_->name));
  return split(iv, 1);
}

IterVar Stage::fuse(const IterVar& outer, const IterVar& inner) {
  bool reduce = outer && outer->is_reduce;
  auto fused = te::make_iter_var((outer ? outer->var->name : "") + "." + (inner ? inner->var->name : "") + ".f", 0, reduce);
  if (!is_leaf(outer) || !is_leaf(inner)) return fused;
  auto io = std::find(leaves_.begin(), leaves_.end(), outer);
  if (io + 1 == leaves_.end() || *(io + 1) != inner) {
    sched_->fail(fmt::format("stage {}: fuse needs adjacent axes, outer first ({} {})", op_->name, outer->var->name, inner->var->name));
    return fused;
  }
  if (outer->is_reduce != inner->is_reduce) {
    sched_->fail(fmt::format("stage {}: cannot fuse a reduction axis with a spatial axis", op_->name));
    return fused;
  }
  relations_.push_back({Relation::Kind::kFuse, nullptr, outer, inner, fused, 0});
  *io = fused;
  leaves_.erase(io + 1);
  return fused;
}

void Stage::reorder(const std::vector<IterVar>& order) {
  std::vector<size_t> positions;
  for (const auto& iv : order) {
    if (!is_leaf(iv)) return;
    positions.push_back(std::find(leaves_.begin(), leaves_.end(), iv) - leaves_.begin());
  }
  std::vector<size_t> sorted = positions;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    sched_->fail(fmt::format("stage {}: reorder names an axis twice", op_->name));
    return;
  }
  for (size_t i = 0; i < order.size(); ++i) leaves_[sorted[i]] = order[i];
}

void Stage::annotate(const IterVar& iv, ir::ForKind kind, std::string tag) {
  if (!is_leaf(iv)) return;
  annotations_[iv.get()] = Annotation{kind, std::move(tag)};
}

void Stage::bind(const IterVar& iv, const std::string& tag) {
  static const std::vector<std::string> kBlocks = {"blockIdx.x", "blockIdx.y", "blockIdx.z"};
  static const std::vector<std::string> kThreads = {"threadIdx.x", "threadIdx.y", "threadIdx.z"};
  if (std::find(kBlocks.begin(), kBlocks.end(), tag) != kBlocks.end()) return annotate(iv, ir::ForKind::kGpuBlock, tag);
  if (std::find(kThreads.begin(), kThreads.end(), tag) != kThreads.end()) return annotate(iv, ir::ForKind::kGpuThread, tag);
  sched_->fail(fmt::format("stage {}: unknown thread tag '{}'", op_->name, tag));
}

void Stage::compute_at(Stage& parent, const IterVar& iv) {
  if (!parent.is_leaf(iv)) return;
  if (&parent == this) {
    sched_->fail(fmt::format("stage {}: cannot compute_at itself", op_->name));
    return;
  }
  attach_stage_ = &parent;
  attach_iv_ = iv;
}

namespace {

void topo_visit(const te::Operation& op, std::unordered_set<const te::OperationNode*>& seen, std::vector<te::Operation>& out) {
  if (!seen.insert(op.get()).second) return;
  for (const auto& in : op->inputs) topo_visit(in, seen, out);
  out.push_back(op);
}

// Rewrites loads of one buffer into loads of another with the same indices.
class BufferReplacer : public ir::IRMutator {
 public:
  BufferReplacer(const ir::BufferNode* from, ir::Buffer to) : from_(from), to_(std::move(to)) {}

 protected:
  ir::Expr mutate_load(const ir::Expr& e, const ir::Load* op) override {
    ir::Expr out = IRMutator::mutate_load(e, op);
    const auto* l = out->as<ir::Load>();
    if (l->buffer.get() != from_) return out;
    return ir::load(to_, l->indices);
  }

 private:
  const ir::BufferNode* from_;
  ir::Buffer to_;
};

}  // namespace

Schedule::Schedule(const std::vector<Tensor>& outputs) : outputs_(outputs) {
  std::unordered_set<const te::OperationNode*> seen;
  std::vector<te::Operation> order;
  for (const auto& t : outputs) topo_visit(t.op, seen, order);
  for (auto& op : order) stages_.push_back(std::make_unique<Stage>(this, op));
}

Stage& Schedule::operator[](const Tensor& t) {
  if (Stage* s = find(t.op.get())) return *s;
  // A tensor outside the schedule is a template bug; keep going on a detached stage so that the
  // caller still gets the recorded error from lowering.
  fail(fmt::format("tensor {} is not part of this schedule", t.name()));
  stages_.push_back(std::make_unique<Stage>(this, t.op));
  return *stages_.back();
}

Stage* Schedule::find(const te::OperationNode* op) {
  for (auto& s : stages_)
    if (s->op_.get() == op) return s.get();
  return nullptr;
}

bool Schedule::is_output(const te::OperationNode* op) const {
  for (const auto& t : outputs_)
    if (t.op.get() == op) return true;
  return false;
}

void Schedule::fail(std::string message) {
  if (status_.ok()) status_ = invalid_argument(std::move(message));
}

void Schedule::insert_before(const te::OperationNode* consumer, te::Operation op) {
  auto it = std::find_if(stages_.begin(), stages_.end(), [&](const auto& s) { return s->op_.get() == consumer; });
  stages_.insert(it, std::make_unique<Stage>(this, std::move(op)));
}

Tensor Schedule::cache_write(const Tensor& t, ir::MemScope scope) {
  Stage* stage = find(t.op.get());
  if (!stage || t.op->kind != te::OperationNode::Kind::kCompute || !stage->relations_.empty()) {
    fail(fmt::format("cache_write({}): needs an unscheduled compute stage of this schedule", t.name()));
    return t;
  }
  const te::Operation& old = t.op;
  auto op = std::make_shared<te::OperationNode>(*old);
  op->name = old->name + ".local";
  ir::VarMap remap;
  op->axes.clear();
  for (const auto& a : old->axes) {
    op->axes.push_back(te::make_iter_var(a->var->name + ".c", a->extent, false));
    remap[a->var.get()] = op->axes.back()->var;
  }
  op->body = ir::substitute(old->body, remap);
  op->buffer = ir::make_buffer(op->name, old->buffer->dtype, old->buffer->shape, scope);
  Tensor local{op};

  std::vector<ir::Expr> idx;
  for (const auto& a : old->axes) idx.push_back(a->var);
  old->body = ir::load(op->buffer, idx);
  old->reduce_axes.clear();
  old->inputs = {op};
  stage->leaves_ = stage->root_iter_vars();
  insert_before(old.get(), op);
  find(op.get())->scope_ = scope;
  return local;
}

Tensor Schedule::cache_read(const Tensor& t, ir::MemScope scope, const std::vector<Tensor>& readers) {
  if (!find(t.op.get()) || readers.empty()) {
    fail(fmt::format("cache_read({}): needs a tensor of this schedule and at least one reader", t.name()));
    return t;
  }
  std::vector<std::string> names;
  for (size_t d = 0; d < t.shape().size(); ++d) names.push_back(fmt::format("ax{}", d));
  Tensor copy = te::compute(t.name() + ".shared", t.shape(), [&](const std::vector<ir::Var>& v) {
    return t(std::vector<ir::Expr>(v.begin(), v.end()));
  }, names);
  copy.op->buffer->scope = scope;
  for (const auto& r : readers) {
    if (!find(r.op.get()) || r.op->kind != te::OperationNode::Kind::kCompute) {
      fail(fmt::format("cache_read({}): reader {} is not a compute stage of this schedule", t.name(), r.name()));
      return copy;
    }
    r.op->body = BufferReplacer(t.buffer().get(), copy.buffer()).mutate(r.op->body);
    std::replace(r.op->inputs.begin(), r.op->inputs.end(), t.op, copy.op);
  }
  // The copy goes right before the earliest reader in the stage order.
  auto is_reader = [&](const std::unique_ptr<Stage>& s) {
    return std::any_of(readers.begin(), readers.end(), [&](const Tensor& r) { return r.op == s->op_; });
  };
  const te::OperationNode* first_reader = (*std::find_if(stages_.begin(), stages_.end(), is_reader))->op_.get();
  insert_before(first_reader, copy.op);
  find(copy.op.get())->scope_ = scope;
  return copy;
}

}  // namespace tunefarm::schedule
