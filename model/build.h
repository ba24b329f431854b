// The model build: an imported model as a library a program loads. Every step of the lowered
// program (model/program.h) becomes a kernel — a tuned operator from the config its chooser picks
// (the history's best record, or the template's default), everything else from its compute
// definition — and a C interface runs them in order over one arena (the memory plan) and the
// weights, which come in a file of their own that the library checks before it runs.
//
// Files: lib<name>.so, lib<name>.a, <name>.h, <name>.weights, manifest.json. At run time the
// library needs the C and C++ runtime libraries only: no LLVM, gRPC or SQLite.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "common/target.h"
#include "common/workload.h"
#include "compiler/library.h"
#include "model/graph.h"

namespace tunefarm::model {

// The kernel chosen for a workload, and where it came from (for the manifest).
struct ChosenKernel {
  Config config;
  bool tuned = false;       // From a record; otherwise the template's default.
  std::string record_json;  // The record, as a JSON line; empty when untuned.
  double gflops = 0;
  double time_s = 0;
  std::string device_key;
  // Set when the record is of the workload in another form, which the model is then built to: a
  // dense layer tuned before its weight arrived in panels (no w_block), whose node then takes
  // W[N, K] and packs it at run time, as it did when that record was measured; a convolution's
  // Winograd form (model/tasks.h winograd_form) that measured faster, whose node takes its weight
  // transformed when the model is built.
  std::optional<Workload> workload;
};
using KernelChooser = std::function<StatusOr<ChosenKernel>(const Workload&)>;

struct BuiltModel {
  std::vector<LibraryFile> files;
  std::vector<std::string> warnings;  // One per workload built from its default config.
  int64_t arena_bytes = 0;            // The memory plan's peak ...
  int64_t naive_bytes = 0;            // ... beside every intermediate in its own buffer.
  int steps = 0;
};

// Builds `graph` (imported; the passes are run here) for `target`, a CPU target.
StatusOr<BuiltModel> build_model(Graph graph, const std::string& name, const Target& target, const KernelChooser& choose);

}  // namespace tunefarm::model
