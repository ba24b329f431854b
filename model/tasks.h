// The tuning tasks of an imported model: each tunable operator (after the passes) as a workload
// string, deduplicated, with how often it occurs and its share of the model's FLOPs — what a
// model's tuning job spreads its trials over, and what `tune-client tasks` shows.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/workload.h"
#include "model/graph.h"

namespace tunefarm::model {

struct Task {
  Workload workload;
  int count = 0;              // Nodes of the model that are this workload.
  double flops = 0;           // Of one occurrence.
  double share = 0;           // count x flops over the sum of that over all tasks.
  std::vector<std::string> nodes;
};

struct TaskTable {
  std::vector<Task> tasks;                  // Largest share first.
  std::map<std::string, int> untuned_ops;   // Operator -> nodes that are not tuning tasks.
  int tunable_nodes = 0;                    // Conv, Gemm and MatMul nodes (the counts sum to it).
  double total_flops = 0;
};

// The workload one tunable node computes, or an error naming the node and what is not supported.
StatusOr<Workload> workload_of(const Graph& graph, const Node& node);

// Runs the passes (constant folding, BatchNormalization folding, LayerNorm and GELU recognition,
// epilogue grouping) and extracts the tasks.
StatusOr<TaskTable> extract_tasks(Graph& graph);

}  // namespace tunefarm::model
