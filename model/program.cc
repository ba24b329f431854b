#include "model/program.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "model/operators.h"
#include "model/passes/group_epilogues.h"
#include "model/tasks.h"

namespace tunefarm::model {
namespace {

constexpr int64_t kAlignment = 64;

int64_t aligned(int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// A dense layer's weight in the layout its kernel takes: [K, N] as [N, K].
Status add_transposed(Graph& graph, const Node& node, const std::string& from, const std::string& to) {
  if (graph.find(to)) return Status();
  TF_ASSIGN_OR_RETURN(const Value* w, graph.value_of(node, from));
  if (!w->constant || w->shape.size() != 2 || w->floats.size() != static_cast<size_t>(w->elements()))
    return invalid_argument(fmt::format("node '{}' ({}): weight '{}' must be a constant matrix", node.name, node.op, from));
  int64_t k = w->shape[0], n = w->shape[1];
  Value t;
  t.name = to;
  t.shape = {n, k};
  t.constant = true;
  t.floats.resize(w->floats.size());
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) t.floats[static_cast<size_t>(j * k + i)] = w->floats[static_cast<size_t>(i * n + j)];
  graph.values[to] = std::move(t);
  return Status();
}

// A convolution's OIHW weight packed to OIHW[ic]i[oc]o: [K/oc, C/ic, R, S, ic, oc].
Status add_packed(Graph& graph, const Node& node, const std::string& from, const std::string& to, int64_t ic, int64_t oc) {
  if (graph.find(to)) return Status();
  TF_ASSIGN_OR_RETURN(const Value* w, graph.value_of(node, from));
  if (!w->constant || w->shape.size() != 4 || w->floats.size() != static_cast<size_t>(w->elements()))
    return invalid_argument(fmt::format("node '{}' ({}): weight '{}' must be a constant OIHW tensor", node.name, node.op, from));
  int64_t K = w->shape[0], C = w->shape[1], R = w->shape[2], S = w->shape[3];
  Value p;
  p.name = to;
  p.shape = {K / oc, C / ic, R, S, ic, oc};
  p.constant = true;
  p.floats.resize(w->floats.size());
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t s = 0; s < S; ++s)
          p.floats[static_cast<size_t>(((((k / oc * (C / ic) + c / ic) * R + r) * S + s) * ic + c % ic) * oc + k % oc)] =
              w->floats[static_cast<size_t>(((k * C + c) * R + r) * S + s)];
  graph.values[to] = std::move(p);
  return Status();
}

}  // namespace

const std::string& Program::storage(const std::string& name) const {
  auto it = storage_of.find(name);
  return it == storage_of.end() ? name : it->second;
}

StatusOr<Program> lower_graph(Graph graph) {
  Program p;
  for (const Node& node : graph.nodes) {
    if (node.outputs.empty()) continue;
    if (is_tunable(node.op)) {
      TF_ASSIGN_OR_RETURN(TunedCall call, tuned_call_of(graph, node));
      if (!call.transposed_weight.empty())
        TF_RETURN_IF_ERROR(add_transposed(graph, node, call.transposed_weight, call.transposed_name));
      if (call.input_block > 0) {
        // The input in channel blocks, once however many convolutions read it so; the weights
        // packed here, once, at build time.
        const std::string& blocked = call.tensors[0];
        if (!graph.find(blocked)) {
          TF_ASSIGN_OR_RETURN(const Value* x, graph.value_of(node, p.storage(node.inputs[0])));
          Computed c = to_blocked_compute(*x, blocked, call.input_block);
          Value v;
          v.name = blocked;
          v.shape = c.def.output.shape();
          graph.values[blocked] = std::move(v);
          p.steps.push_back(Step{node.name, "to NCHWc", std::nullopt, c.def, c.tensors});
        }
        TF_RETURN_IF_ERROR(add_packed(graph, node, node.inputs[1], call.tensors[1], call.input_block, call.output_block));
      }
      const std::string& raw = call.tensors.back();
      if (raw != node.outputs[0]) {
        Value pre = *graph.find(node.outputs[0]);
        pre.name = raw;
        if (call.output_block > 0)
          pre.shape = {pre.shape[0], pre.shape[1] / call.output_block, pre.shape[2], pre.shape[3], call.output_block};
        graph.values[raw] = std::move(pre);
      }
      p.steps.push_back(Step{node.name, node.op, call.workload, {}, call.tensors});
      if (raw != node.outputs[0]) {
        TF_ASSIGN_OR_RETURN(Computed e, epilogue_compute(graph, node, raw, call.remaining, call.output_block));
        p.steps.push_back(Step{node.name, "epilogue", std::nullopt, e.def, e.tensors});
      }
    } else if (is_view(node.op)) {
      TF_ASSIGN_OR_RETURN(const Value* in, graph.value_of(node, node.inputs.at(0)));
      TF_ASSIGN_OR_RETURN(const Value* out, graph.value_of(node, node.outputs[0]));
      if (in->elements() != out->elements())
        return invalid_argument(fmt::format("node '{}' ({}): {} elements become {}", node.name, node.op, in->elements(),
                                            out->elements()));
      p.storage_of[out->name] = p.storage(in->name);
    } else {
      TF_ASSIGN_OR_RETURN(Computed c, operator_compute(graph, node));
      p.steps.push_back(Step{node.name, node.op, std::nullopt, c.def, c.tensors});
    }
  }
  // A model output that is a view of another value gets its own copy: the caller's buffer is
  // where outputs go.
  for (const std::string& out : graph.outputs) {
    auto it = p.storage_of.find(out);
    bool is_input = std::count(graph.inputs.begin(), graph.inputs.end(), out) > 0;
    if (it == p.storage_of.end() && !is_input) continue;
    std::string from = it == p.storage_of.end() ? out : it->second;
    if (it != p.storage_of.end()) p.storage_of.erase(it);
    const Value* v = graph.find(from);
    if (!v) return invalid_argument(fmt::format("model output '{}' has no value", out));
    Computed c = copy_compute(*v, out);
    p.steps.push_back(Step{out, "copy", std::nullopt, c.def, c.tensors});
  }
  p.graph = std::move(graph);
  return p;
}

MemoryPlan plan_memory(const Program& program) {
  const Graph& g = program.graph;
  std::set<std::string> external(g.inputs.begin(), g.inputs.end());
  external.insert(g.outputs.begin(), g.outputs.end());
  struct Life {
    int64_t bytes = 0;
    size_t first = 0, last = 0;
  };
  std::map<std::string, Life> lives;
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const auto& tensors = program.steps[s].tensors;
    for (size_t t = 0; t < tensors.size(); ++t) {
      const std::string& root = program.storage(tensors[t]);
      const Value* v = g.find(root);
      if (!v || v->constant || external.count(root)) continue;
      auto [it, fresh] = lives.try_emplace(root);
      if (fresh) {
        it->second.bytes = aligned(std::max<int64_t>(1, v->elements()) * 4);
        it->second.first = s;
      }
      it->second.last = s;
    }
  }
  MemoryPlan plan;
  std::vector<std::pair<std::string, Life>> order(lives.begin(), lives.end());
  // Largest first: the big activations settle at the bottom and the small ones fill the gaps.
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
  std::vector<std::pair<int64_t, Life>> placed;  // Offset and life of each value placed so far.
  for (const auto& [name, life] : order) {
    plan.naive_bytes += life.bytes;
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (const auto& [offset, other] : placed)
      if (other.first <= life.last && life.first <= other.last) taken.push_back({offset, offset + other.bytes});
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : taken) {
      if (offset + life.bytes <= lo) break;
      offset = std::max(offset, hi);
    }
    plan.offsets[name] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + life.bytes);
    placed.push_back({offset, life});
  }
  return plan;
}

}  // namespace tunefarm::model
