// A model as the kernel calls that run it: the graph (after the passes) lowered to steps, each a
// tuned operator's workload or the compute definition of everything else, reading and writing
// values by name; views (Reshape, Flatten, ...) share their input's storage and cost nothing. The
// memory plan then places every intermediate value in one arena, reusing the space of values no
// step reads any more.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/workload.h"
#include "compiler/ops/op.h"
#include "model/graph.h"
#include "model/tasks.h"

namespace tunefarm::model {

struct Step {
  std::string node;                   // The graph node it computes, for messages and profiles.
  std::string op;                     // The node's operator; "epilogue" or "copy" for the steps added.
  std::optional<Workload> workload;   // A tuned operator's kernel ...
  ops::ComputeDef compute;            // ... or the definition compiled with a plain schedule.
  std::vector<std::string> tensors;   // Values in argument order, the output last.
  bool vectorize = false;             // The definition's output vectorizes (ops::plain_schedule).
  // The kernel runs `repeat` times (a grouped convolution's groups), each of `tensors` advanced by
  // its `strides` elements from one run to the next (empty when repeat is 1).
  int64_t repeat = 1;
  std::vector<int64_t> strides;
};

struct Program {
  Graph graph;                        // With the values lowering adds (transposed weights, ...).
  std::vector<Step> steps;
  // A view's value -> the value whose storage it is (never itself a view).
  std::map<std::string, std::string> storage_of;

  // The value whose storage `name` is.
  const std::string& storage(const std::string& name) const;
};

// Lowers a graph that went through the passes (model/tasks.h extract_tasks); an error names the
// first node a built model cannot run. `forms`: workloads whose nodes are built in another form
// (model/tasks.h tuned_call_of).
StatusOr<Program> lower_graph(Graph graph, const WorkloadForms& forms = {});

// Whether a build can run every node of `graph` (after the passes): an error names every node it
// cannot, with the reason of each, so that a model is refused before anything is tuned for it.
Status check_buildable(const Graph& graph);

struct MemoryPlan {
  std::map<std::string, int64_t> offsets;  // Byte offset in the arena of each intermediate value.
  int64_t arena_bytes = 0;                 // The peak: what the plan needs.
  int64_t naive_bytes = 0;                 // Every intermediate in a buffer of its own.
};

// Places the intermediate values (neither constants nor the model's inputs and outputs) in one
// arena: a value lives from the step that writes it to the last step that reads it (or a view of
// it), and values whose lives do not overlap share space. 64-byte aligned.
MemoryPlan plan_memory(const Program& program);

}  // namespace tunefarm::model
