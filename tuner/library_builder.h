// `tune-client build`: the history's answer as a library a program links. Per workload, the best
// record for the target (and device key) by the history's one rule (RecordStore::query_best, the
// figure of common/figure.h), or the template's default config where the history has nothing;
// compiled by compiler/library.h, with a manifest saying where every kernel came from. tunerd runs
// it through `tunefarm-build-library` (common/library_request.h) on its history's best records, and
// tune-client on records exported from one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/library_request.h"
#include "common/status.h"
#include "common/target.h"
#include "common/workload.h"
#include "compiler/library.h"
#include "db/record_store.h"
#include "model/build.h"

namespace tunefarm {

struct BuiltLibrary {
  std::vector<LibraryFile> files;     // lib<name>.so, lib<name>.a, <name>.h, manifest.json.
  std::vector<std::string> warnings;  // One line per workload built from its default config.
};

// Checks the request (workloads given, distinct and at most kMaxLibraryWorkloads, a valid name, a
// target LLVM can build for) before anything is compiled.
Status check_library_request(const LibraryRequest& request);

// Every successful measurement of the best record's config and of the default's on the best's
// device key: what tunerd hands a builder beside the two figures' records, so that the builder's
// figures of the two are the history's and it can compare them side by side in the best record's
// job's final re-measurement (its interleaved rounds, the same conditions for both), which
// decides between them where it measured both. A config's figure mixes its trial with its
// re-measurements, and a task's default is its first trial, measured while the job's first
// batches were built beside it (in a MobileNetV3-Small job, defaults' trials ran 2.3% slower than
// their re-measurements on average, other configs' 1.8% faster; with one round the upper median of
// two measurements is the slower: a default of 9.1 us figured at 13.7, and a config of 10.7 won).
std::vector<v1::Record> best_and_default_records(db::RecordStore& store, const Workload& workload,
                                                 const LibraryRequest& request, const v1::Record& best,
                                                 const v1::Record& def);

// The template's default config's own record (the figure of its measurements) for the request's
// target on `device_key`, when the history has one: what the best record must clearly beat.
std::optional<v1::Record> default_record(db::RecordStore& store, const Workload& workload, const LibraryRequest& request,
                                         const std::string& device_key);

// The kernel for one workload: the best record for the request's target and device key, else the
// template's default config (saying so in `warnings`), else with require_tuned an error.
StatusOr<model::ChosenKernel> choose_kernel(db::RecordStore& store, const Workload& workload, const LibraryRequest& request,
                                            std::vector<std::string>& warnings);

// A model node's kernel: its workload's, or its Winograd form's (model/tasks.h winograd_form)
// where that form was tuned and its best record is clearly faster than what the workload's own
// would be built from (or the workload has none); then `workload` names the form. A library of
// named workloads never switches: its caller passes the weights in the layout the workload names.
StatusOr<model::ChosenKernel> choose_model_kernel(db::RecordStore& store, const Workload& workload,
                                                  const LibraryRequest& request, std::vector<std::string>& warnings);

// A kernel library of the request's workloads, or the request's model as a library.
StatusOr<BuiltLibrary> build_library(const LibraryRequest& request, db::RecordStore& store);

}  // namespace tunefarm
