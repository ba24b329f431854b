#include "compiler/features/features.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "compiler/ir/visitor.h"
#include "compiler/lower/simplify.h"

namespace tunefarm::features {

using namespace ir;

namespace {

constexpr int kLoops = 8;
constexpr int kLoopFeatures = 6;
constexpr int kBuffers = 4;
constexpr int kBufferFeatures = 4;

float lg(double x) { return static_cast<float>(std::log2(1.0 + std::max(0.0, x))); }

struct LoopInfo {
  const For* loop;
  int64_t extent;  // Constant upper bound.
};

struct StoreSite {
  const Store* store;
  std::vector<LoopInfo> loops;  // Outer to inner.
  double trips;
};

// Loops around every store, with constant bounds on their extents.
class Collector : public IRVisitor {
 public:
  std::vector<StoreSite> stores;
  int num_loops = 0;
  int max_depth = 0;
  double local_bytes = 0, workspace_bytes = 0;

 protected:
  void visit_for(const For* op) override {
    ++num_loops;
    auto b = lower::const_bounds(op->extent, ranges_);
    int64_t ext = b ? std::max<int64_t>(b->hi, 0) : 1;
    ranges_[op->var.get()] = {0, std::max<int64_t>(ext - 1, 0)};
    stack_.push_back({op, ext});
    max_depth = std::max<int>(max_depth, static_cast<int>(stack_.size()));
    IRVisitor::visit_for(op);
    stack_.pop_back();
  }
  void visit_store(const Store* op) override {
    double trips = 1;
    for (const auto& l : stack_) trips *= static_cast<double>(l.extent);
    stores.push_back({op, stack_, trips});
    IRVisitor::visit_store(op);
  }
  void visit_allocate(const Allocate* op) override {
    double bytes = static_cast<double>(op->buffer->num_elements()) * op->buffer->dtype.bytes();
    if (op->buffer->scope == MemScope::kWorkspace) workspace_bytes += bytes;
    else local_bytes += bytes;
    IRVisitor::visit_allocate(op);
  }

 private:
  std::vector<LoopInfo> stack_;
  lower::RangeMap ranges_;
};

int float_ops(const Expr& e) {
  int n = 0;
  post_order_visit(e, [&](const Expr& x) {
    if (x->type.is_float() && (x->as<Binary>() || x->as<Select>())) ++n;
  });
  return n;
}

// d(index)/d(var) when the index is linear in it; 0 when it does not depend on it.
int64_t stride_of(const Expr& index, const VarNode* v) {
  if (!uses_var(index, v)) return 0;
  Expr one = substitute(index, {{v, int_imm(1)}});
  Expr zero = substitute(index, {{v, int_imm(0)}});
  Expr d = lower::simplify(sub(one, zero));
  const int64_t* c = as_const_int(d);
  return c ? *c : 1 << 20;
}

}  // namespace

std::vector<float> extract_features(const LoopNest& nest) {
  const LoweredFunc& loops = nest.func;
  std::vector<float> f(kFeatureLength, 0.0f);
  Collector col;
  col.visit(loops.body);
  if (col.stores.empty()) return f;
  // The heaviest store: the most float operations over all its iterations.
  const StoreSite* main = &col.stores[0];
  double best = -1;
  for (const auto& s : col.stores) {
    double w = s.trips * (1 + float_ops(s.store->value));
    if (w > best) {
      best = w;
      main = &s;
    }
  }
  const Expr& out_index = main->store->indices[0];
  int first = std::max(0, static_cast<int>(main->loops.size()) - kLoops);
  int slot = kLoops - (static_cast<int>(main->loops.size()) - first);
  for (size_t i = first; i < main->loops.size(); ++i, ++slot) {
    const LoopInfo& l = main->loops[i];
    float* p = &f[slot * kLoopFeatures];
    p[0] = lg(static_cast<double>(l.extent));
    p[1] = l.loop->for_kind == ForKind::kParallel;
    p[2] = l.loop->for_kind == ForKind::kVectorized;
    p[3] = l.loop->for_kind == ForKind::kUnrolled;
    p[4] = l.loop->for_kind == ForKind::kGpuBlock || l.loop->for_kind == ForKind::kGpuThread;
    p[5] = !uses_var(out_index, l.loop->var.get());
  }

  // Buffers: the output first, then loads by how often they appear.
  std::vector<std::pair<Buffer, Expr>> accesses = {{main->store->buffer, out_index}};
  std::map<const BufferNode*, int> count;
  std::vector<std::pair<Buffer, Expr>> loads;
  post_order_visit(main->store->value, [&](const Expr& e) {
    if (const auto* l = e->as<Load>(); l && l->buffer != main->store->buffer) {
      if (count[l->buffer.get()]++ == 0) loads.emplace_back(l->buffer, l->indices[0]);
    }
  });
  std::stable_sort(loads.begin(), loads.end(), [&](const auto& a, const auto& b) { return count[a.first.get()] > count[b.first.get()]; });
  accesses.insert(accesses.end(), loads.begin(), loads.end());
  const VarNode* innermost = main->loops.empty() ? nullptr : main->loops.back().loop->var.get();
  for (size_t b = 0; b < accesses.size() && b < static_cast<size_t>(kBuffers); ++b) {
    const Expr& idx = accesses[b].second;
    double touched = 1;
    for (const auto& l : main->loops)
      if (uses_var(idx, l.loop->var.get())) touched *= static_cast<double>(l.extent);
    int64_t stride = innermost ? stride_of(idx, innermost) : 0;
    float* p = &f[kLoops * kLoopFeatures + b * kBufferFeatures];
    p[0] = lg(static_cast<double>(std::llabs(stride)));
    p[1] = lg(touched);
    p[2] = lg(main->trips / std::max(1.0, touched));
    p[3] = stride == 1;
  }

  float* g = &f[kLoops * kLoopFeatures + kBuffers * kBufferFeatures];
  g[0] = lg(main->trips * float_ops(main->store->value));
  g[1] = lg(main->trips);
  g[2] = lg(static_cast<double>(loads.size()));
  g[3] = lg(col.num_loops);
  g[4] = static_cast<float>(col.max_depth);
  g[5] = lg(col.local_bytes);
  g[6] = lg(col.workspace_bytes);
  for (auto it = main->loops.rbegin(); it != main->loops.rend(); ++it)
    if (it->loop->for_kind == ForKind::kVectorized) {
      g[7] = lg(static_cast<double>(it->extent));
      break;
    }
  return f;
}

std::vector<std::string> feature_names() {
  std::vector<std::string> names;
  const char* loop_names[kLoopFeatures] = {"log_extent", "parallel", "vectorized", "unrolled", "gpu_bound", "reduction"};
  for (int l = 0; l < kLoops; ++l)
    for (const char* n : loop_names) names.push_back(fmt::format("loop{}.{}", l, n));
  const char* buf_names[kBufferFeatures] = {"log_stride", "log_touched", "log_reuse", "unit_stride"};
  for (int b = 0; b < kBuffers; ++b)
    for (const char* n : buf_names) names.push_back(fmt::format("buffer{}.{}", b, n));
  for (const char* n : {"log_flops", "log_iterations", "log_loads", "log_loops", "depth", "log_local_bytes",
                        "log_workspace_bytes", "log_vector_lanes"})
    names.push_back(n);
  return names;
}

}  // namespace tunefarm::features
