#include "tuner/library_builder.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/operators/operator.h"
#include "common/operators/winograd.h"
#include "common/wire/wire.h"
#include "compiler/build.h"
#include "compiler/codegen/codegen.h"
#include "model/build.h"
#include "model/onnx_import.h"
#include "model/tasks.h"

namespace tunefarm {

using json = nlohmann::ordered_json;

Status check_library_request(const LibraryRequest& request) {
  if (request.model_path.empty() && request.workloads.empty())
    return invalid_argument("no workload to build: give --workload, --workloads or --model");
  if (!request.model_path.empty() && !request.workloads.empty())
    return invalid_argument("give workloads or a model, not both");
  if (request.workloads.size() > kMaxLibraryWorkloads)
    return invalid_argument(fmt::format("{} workloads; a library holds at most {}", request.workloads.size(), kMaxLibraryWorkloads));
  TF_RETURN_IF_ERROR(check_library_name(request.name));
  std::set<std::string> seen;
  for (const auto& w : request.workloads) {
    TF_RETURN_IF_ERROR(validate_workload(w));
    TF_RETURN_IF_ERROR(lookup_op(w).status());
    if (!seen.insert(w.to_string()).second) return invalid_argument(fmt::format("workload {} is given twice", w.to_string()));
  }
  if (!request.model_path.empty() && request.target.kind != Target::Kind::kLLVM)
    return unimplemented(fmt::format("models are built for CPU targets; '{}' is not one", request.target.to_string()));
  return codegen::check_target(request.target);
}

namespace {

// Measurements on a shared machine vary by a few percent from run to run: a config that beats
// the template's default by less than this was as likely lucky as faster (in built ResNet-50s, a
// job's bests from a busy machine ran 6-10% slower than the defaults). The default's own record
// then stands in for the best.
constexpr double kClearlyFaster = 1.05;
constexpr int kRecordsScanned = 1000;  // query_best's most

// How many times faster the best config ran than the default in the rounds of its job's final
// re-measurement that measured both (the median of the default's cost over the best's); nullopt
// where none did.
std::optional<double> side_by_side(db::RecordStore& store, const Workload& w, const LibraryRequest& request,
                                   const v1::Record& best, const v1::Record& def) {
  std::string best_config = from_proto(best.config()).to_json();
  std::map<int, double> best_cost, def_cost;
  for (const v1::Record& r : best_and_default_records(store, w, request, best, def))
    if (r.job_id() == best.job_id() && r.remeasure_round() > 0)
      (from_proto(r.config()).to_json() == best_config ? best_cost : def_cost)[r.remeasure_round()] = r.mean_cost_s();
  std::vector<double> ratios;
  for (const auto& [round, cost] : best_cost)
    if (auto it = def_cost.find(round); it != def_cost.end() && cost > 0) ratios.push_back(it->second / cost);
  if (ratios.empty()) return std::nullopt;
  std::sort(ratios.begin(), ratios.end());
  return ratios[ratios.size() / 2];
}

// The best record, or the default config's own record (measured on the same key) when the best
// does not clearly beat it, side by side where its job measured both so, otherwise by their
// figures; then `fell_back` says why.
v1::Record clearly_best(db::RecordStore& store, const Workload& w, const LibraryRequest& request,
                        const v1::Record& best, std::string& fell_back) {
  std::optional<v1::Record> r = default_record(store, w, request, best.device_key());
  if (!r || from_proto(best.config()).to_json() == from_proto(r->config()).to_json()) return best;
  std::optional<double> measured_together = side_by_side(store, w, request, best, *r);
  double faster = measured_together ? *measured_together : best.gflops() / r->gflops();
  if (faster > kClearlyFaster) return best;
  fell_back = fmt::format("{}: the best tuned config does not beat the template's default by {:.0f}% on device key "
                          "'{}' ({:.3f}x its speed, {}): built from the default",
                          w.to_string(), (kClearlyFaster - 1) * 100, r->device_key(), faster,
                          measured_together ? "measured side by side" : "by their figures");
  return *r;
}

}  // namespace

std::vector<v1::Record> best_and_default_records(db::RecordStore& store, const Workload& w, const LibraryRequest& request,
                                                 const v1::Record& best, const v1::Record& def) {
  constexpr int64_t kRecordsListed = 100000;  // list_records' most
  std::vector<v1::Record> out;
  db::RecordFilter filter;
  filter.workload = w;
  filter.target = request.target;
  filter.device_key = best.device_key();
  auto page = store.list_records(filter, kRecordsListed);
  if (!page.ok()) return out;
  std::string best_config = from_proto(best.config()).to_json(), def_config = from_proto(def.config()).to_json();
  for (v1::Record& r : page->records) {
    if (r.result().error() != v1::OK) continue;
    std::string config = from_proto(r.config()).to_json();
    if (config == best_config || config == def_config) out.push_back(std::move(r));
  }
  return out;
}

std::optional<v1::Record> default_record(db::RecordStore& store, const Workload& w, const LibraryRequest& request,
                                         const std::string& device_key) {
  auto def = default_config(w, request.target);
  if (!def.ok()) return std::nullopt;
  auto space = config_space(w, request.target, def->template_name);
  auto ranked = store.query_best(w, request.target, request.device_key, kRecordsScanned);
  if (!space.ok() || !ranked.ok()) return std::nullopt;
  // The default as its candidates are measured (as built), or as histories from before that
  // recorded it.
  std::string want = as_built(w, *def).to_json(), recorded = def->to_json();
  for (const v1::Record& r : *ranked) {
    auto c = space->complete(from_proto(r.config()));
    if (c.ok() && (c->to_json() == want || c->to_json() == recorded) && r.device_key() == device_key) return r;
  }
  return std::nullopt;
}

StatusOr<model::ChosenKernel> choose_kernel(db::RecordStore& store, const Workload& w, const LibraryRequest& request,
                                            std::vector<std::string>& warnings) {
  TF_ASSIGN_OR_RETURN(auto best, store.query_best(w, request.target, request.device_key, 1));
  std::string where = request.device_key.empty() ? "" : fmt::format(" on device key '{}'", request.device_key);
  model::ChosenKernel k;
  if (best.empty() && w.param("w_block") > 0) {
    // A dense layer tuned before models packed its weight into panels at build time: its record
    // builds the layer as it was measured, taking W[N, K].
    Workload plain = operators::without_weight_panels(w);
    TF_ASSIGN_OR_RETURN(auto older, store.query_best(plain, request.target, request.device_key, 1));
    if (!older.empty()) {
      TF_ASSIGN_OR_RETURN(k, choose_kernel(store, plain, request, warnings));
      k.workload = plain;
      return k;
    }
  }
  if (best.empty()) {
    if (request.require_tuned)
      return not_found(fmt::format("no successful record of {} for target '{}'{} (--require-tuned)", w.to_string(),
                                   request.target.to_string(), where));
    TF_ASSIGN_OR_RETURN(k.config, default_config(w, request.target));
    warnings.push_back(fmt::format("no record of {} for target '{}'{}: built from the template's default config",
                                   w.to_string(), request.target.to_string(), where));
    return k;
  }
  std::string fell_back;
  const v1::Record r = clearly_best(store, w, request, best.front(), fell_back);
  if (!fell_back.empty()) warnings.push_back(fell_back);
  k.config = from_proto(r.config());
  // A record from before its template's space changed may name a point the template no longer
  // builds: the default stands in for it, and the build says so.
  auto space = config_space(w, request.target, k.config.template_name);
  Status valid = space.ok() ? space->check(k.config) : space.status();
  if (!valid.ok()) {
    TF_ASSIGN_OR_RETURN(k.config, default_config(w, request.target));
    warnings.push_back(fmt::format("the best record of {} names a config its template no longer builds ({}): built from "
                                   "the template's default config", w.to_string(), valid.message()));
    return k;
  }
  k.tuned = true;
  k.record_json = record_to_json_line(r);
  k.gflops = r.gflops();
  k.time_s = r.mean_cost_s();
  k.device_key = r.device_key();
  return k;
}

StatusOr<model::ChosenKernel> choose_model_kernel(db::RecordStore& store, const Workload& w, const LibraryRequest& request,
                                                  std::vector<std::string>& warnings) {
  std::vector<std::string> own_warnings;
  StatusOr<model::ChosenKernel> own = choose_kernel(store, w, request, own_warnings);
  if (std::optional<Workload> form = model::winograd_form(w)) {
    std::vector<std::string> form_warnings;
    StatusOr<model::ChosenKernel> other = choose_kernel(store, *form, request, form_warnings);
    // Measured, the faster form by a clear margin; unmeasured both, the form the defaults' figures
    // favour (common/operators/winograd.h winograd_by_default).
    bool measured_faster = other.ok() && other->tuned && (!own.ok() || !own->tuned || other->time_s * kClearlyFaster < own->time_s);
    bool faster_by_default = other.ok() && !other->tuned && own.ok() && !own->tuned &&
                             operators::winograd_by_default(*form);
    if (measured_faster || faster_by_default) {
      other->workload = *form;
      warnings.insert(warnings.end(), form_warnings.begin(), form_warnings.end());
      return other;
    }
  }
  warnings.insert(warnings.end(), own_warnings.begin(), own_warnings.end());
  return own;
}

namespace {

// The target a library is built for. One that names no CPU takes the CPU its tuned records were
// built for (tunerd compiles a job for the boards of its key, not for its own host), so that the
// library runs the code those boards measured. Records built for different CPUs cannot share one.
StatusOr<Target> library_build_target(const LibraryRequest& request, const std::vector<model::ChosenKernel>& chosen) {
  if (request.target.kind != Target::Kind::kLLVM || !request.target.mcpu.empty()) return request.target;
  std::optional<Target> built_for;
  for (const model::ChosenKernel& k : chosen) {
    if (!k.tuned) continue;
    TF_ASSIGN_OR_RETURN(v1::Record record, record_from_json_line(k.record_json));
    if (!record.has_built_for()) continue;
    TF_ASSIGN_OR_RETURN(Target target, from_proto(record.built_for()));
    if (built_for && !(target == *built_for))
      return failed_precondition(fmt::format(
          "the best records of these workloads were built for different CPUs ('{}' and '{}'): give --device to take "
          "one key's records, or a --target that names its -mcpu",
          built_for->to_string(), target.to_string()));
    built_for = target;
  }
  return built_for.value_or(request.target);
}

StatusOr<BuiltLibrary> build_model_library(const LibraryRequest& request, db::RecordStore& store) {
  model::ImportOptions options;
  options.input_shapes = request.input_shapes;
  TF_ASSIGN_OR_RETURN(model::Graph graph, model::import_onnx_file(request.model_path, options));
  BuiltLibrary out;
  auto choose = [&](const Workload& w) { return choose_model_kernel(store, w, request, out.warnings); };
  TF_ASSIGN_OR_RETURN(model::BuiltModel built, model::build_model(std::move(graph), request.name, request.target, choose));
  out.files = std::move(built.files);
  return out;
}

}  // namespace

StatusOr<BuiltLibrary> build_library(const LibraryRequest& request, db::RecordStore& store) {
  TF_RETURN_IF_ERROR(check_library_request(request));
  if (!request.model_path.empty()) return build_model_library(request, store);
  std::vector<LibraryKernel> kernels;
  json manifest_kernels = json::array();
  BuiltLibrary out;
  std::vector<model::ChosenKernel> choices;
  for (const Workload& w : request.workloads) {
    TF_ASSIGN_OR_RETURN(model::ChosenKernel chosen, choose_kernel(store, w, request, out.warnings));
    choices.push_back(chosen);
    // The kernels run on the threads the program sets (tk_set_num_threads), as a model's do, split
    // where that pays, as their candidates were measured.
    LibraryKernel k{w, as_built(w, chosen.config), {}};
    json entry = {{"workload", w.to_string()}, {"function", library_function_name(request.name, w)}};
    if (chosen.tuned) {
      k.notes.push_back(fmt::format("tuned: {:.1f} GFLOP/s, {:.3f} ms on device key '{}'", chosen.gflops,
                                    chosen.time_s * 1e3, chosen.device_key));
      entry["source"] = "tuned";
      entry["gflops"] = chosen.gflops;
      entry["time_s"] = chosen.time_s;
      entry["device_key"] = chosen.device_key;
      entry["record"] = json::parse(chosen.record_json);
    } else {
      k.notes.push_back("untuned: the template's default config (the history had no record)");
      entry["source"] = "default";
    }
    k.notes.push_back("config: " + k.config.to_json());
    entry["config"] = json::parse(k.config.to_json());
    if (!(k.config == chosen.config)) entry["chosen_config"] = json::parse(chosen.config.to_json());
    manifest_kernels.push_back(std::move(entry));
    kernels.push_back(std::move(k));
  }
  TF_ASSIGN_OR_RETURN(Target target, library_build_target(request, choices));
  TF_ASSIGN_OR_RETURN(out.files, build_kernel_library(request.name, target, kernels));
  json manifest = {{"name", request.name},
                   {"target", target.to_string()},
                   {"device_key", request.device_key},
                   {"header", request.name + ".h"},
                   {"shared_library", "lib" + request.name + ".so"},
                   {"static_library", "lib" + request.name + ".a"},
                   {"kernels", std::move(manifest_kernels)}};
  out.files.push_back({"manifest.json", manifest.dump(2) + "\n"});
  return out;
}

}  // namespace tunefarm
