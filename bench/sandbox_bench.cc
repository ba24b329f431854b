// sandbox_bench: the measurement sandbox's cost. Each candidate runs in a fresh worker process
// (measure/measure.h) with its namespaces, limits and filter; this measures
//   - the wall time of one candidate through the Measurer (start, load, one run, stop), against
//     the same load and run in this process: the difference is what the sandbox costs per
//     candidate;
//   - the same through a Measurer whose workers get no namespaces (as in a container without
//     them), and through one whose workers get no cgroups, in turn with the others: the
//     namespaces' and the cgroups' share of that cost; and the making and removing of one
//     worker's cgroup alone (measure/cgroup.h), where this system lets the bench make cgroups;
//   - the probe kernel (a 32^3 matmul installed beside the worker) timed through the Measurer
//     and in this process with the same options, alternately: the sandbox must not change what
//     a kernel costs;
//   - the measuring part of a job of --job-trials candidates (tuning options, outputs checked
//     against the reference), each through the sandbox and in this process in turn: the wall
//     time a tuning job spends measuring, both ways.
// Ends with one JSON line of figures.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "compiler/runtime/kernel_runtime.h"
#include "measure/cpu_runner.h"
#include "measure/measure.h"
#include "measure/measure_options.h"
#include "measure/tensors.h"
#include "measure/timer.h"

namespace tunefarm {
namespace {

double seconds_since(std::chrono::steady_clock::time_point begin) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double mean(const v1::MeasureResult& r) {
  double sum = 0;
  for (double c : r.costs()) sum += c;
  return r.costs_size() ? sum / r.costs_size() : 0;
}

// Loads the probe kernel in this process, runs it once and times it as the worker would.
StatusOr<double> in_process(const ProbeKernel& probe, const v1::MeasureOptions& options, bool time_it) {
  TF_ASSIGN_OR_RETURN(auto tensors, allocate_tensors(probe.candidate.args()));
  fill_tensors(tensors, options.input_seed());
  std::string path = fmt::format("{}/sandbox_bench_{}.so", std::filesystem::temp_directory_path().string(), getpid());
  {
    std::ofstream out(path, std::ios::binary);
    out << probe.candidate.data();
  }
  auto kernel = bind_cpu_kernel(path, probe.candidate, tensors);
  std::filesystem::remove(path);
  if (!kernel.ok()) return kernel.status();
  TF_RETURN_IF_ERROR((*kernel)->run_once());
  if (!time_it) return 0.0;
  TF_ASSIGN_OR_RETURN(std::vector<double> costs, time_kernel(**kernel, options));
  double sum = 0;
  for (double c : costs) sum += c;
  return sum / static_cast<double>(costs.size());
}

int run(int candidates, int rounds, int job_trials) {
  auto measurer = Measurer::create();
  MeasurerOptions bare_options;
  bare_options.namespaces = false;
  auto bare = Measurer::create(bare_options);
  MeasurerOptions uncontained_options;
  uncontained_options.cgroups = false;
  auto uncontained = Measurer::create(uncontained_options);
  for (const auto* m : {&measurer, &bare, &uncontained}) {
    if (!m->ok()) {
      fmt::print(stderr, "sandbox_bench: {}\n", m->status().to_string());
      return 1;
    }
  }
  auto worker = find_measure_worker();
  auto probe = load_probe_kernel((std::filesystem::path(*worker).parent_path() / "tunefarm-probe-kernel.so").string());
  if (!probe.ok()) {
    fmt::print(stderr, "sandbox_bench: {}\n", probe.status().to_string());
    return 1;
  }
  tunefarm_runtime_num_threads();

  // One run per candidate, unchecked: what is left is starting, loading and stopping.
  v1::MeasureOptions once;
  once.set_number(1);
  once.set_repeat(1);
  once = with_defaults(once);
  std::vector<double> sandboxed, without_namespaces, without_cgroups, local;
  for (int i = 0; i < candidates; ++i) {
    for (Measurer* m : {measurer->get(), bare->get(), uncontained->get()}) {
      auto begin = std::chrono::steady_clock::now();
      v1::MeasureResult r = m->measure(probe->workload, once, nullptr, probe->candidate);
      (m == measurer->get() ? sandboxed : m == bare->get() ? without_namespaces : without_cgroups)
          .push_back(seconds_since(begin));
      if (r.error() != v1::OK) {
        fmt::print(stderr, "sandbox_bench: the probe kernel failed: {}\n", r.error_msg());
        return 1;
      }
    }
    auto begin = std::chrono::steady_clock::now();
    begin = std::chrono::steady_clock::now();
    if (auto s = in_process(*probe, once, false); !s.ok()) {
      fmt::print(stderr, "sandbox_bench: {}\n", s.status().to_string());
      return 1;
    }
    local.push_back(seconds_since(begin));
  }
  double per_candidate_ms = median(sandboxed) * 1e3, in_process_ms = median(local) * 1e3;
  double bare_ms = median(without_namespaces) * 1e3, uncontained_ms = median(without_cgroups) * 1e3;
  fmt::print("per candidate: {:.2f} ms through the sandbox ({:.2f} ms without namespaces, {:.2f} ms without cgroups), "
             "{:.3f} ms in process: the sandbox costs {:.2f} ms\n",
             per_candidate_ms, bare_ms, uncontained_ms, in_process_ms, per_candidate_ms - in_process_ms);
  // A worker's cgroup alone: made with its limits, then removed.
  double cgroup_ms = 0;
  std::string why_not;
  if (auto cgroups = CgroupManager::shared("", why_not)) {
    std::vector<double> cycles;
    for (int i = 0; i < candidates; ++i) {
      auto begin = std::chrono::steady_clock::now();
      auto cgroup = cgroups->make({1ull << 30, kDefaultPidsPerCandidate});
      if (!cgroup.ok() || !cgroup->remove().ok()) {
        fmt::print(stderr, "sandbox_bench: {}\n", cgroup.ok() ? "cannot remove a cgroup" : cgroup.status().to_string());
        return 1;
      }
      cycles.push_back(seconds_since(begin));
    }
    cgroup_ms = median(cycles) * 1e3;
    fmt::print("one worker's cgroup made and removed: {:.3f} ms\n", cgroup_ms);
  } else {
    fmt::print("no cgroups: {}\n", why_not);
  }
  fmt::print("sandbox: {}\n", (*measurer)->sandbox_description());

  // The kernel's cost, as a tuning job measures it (repeats of at least 50 ms), both ways in turn.
  v1::MeasureOptions tuning = default_tuning_measure_options();
  tuning.set_check_correctness(false);
  tuning = with_defaults(tuning);
  std::vector<double> through, here;
  for (int i = 0; i < rounds; ++i) {
    v1::MeasureResult r = (*measurer)->measure(probe->workload, tuning, nullptr, probe->candidate);
    auto l = in_process(*probe, tuning, true);
    if (r.error() != v1::OK || !l.ok()) {
      fmt::print(stderr, "sandbox_bench: timing failed: {} {}\n", r.error_msg(), l.status().to_string());
      return 1;
    }
    through.push_back(mean(r));
    here.push_back(*l);
  }
  double sandboxed_us = median(through) * 1e6, in_process_us = median(here) * 1e6;
  fmt::print("probe kernel (32^3 matmul): {:.3f} us through the sandbox, {:.3f} us in process (ratio {:.3f})\n",
             sandboxed_us, in_process_us, sandboxed_us / in_process_us);

  // A job's measuring: every candidate checked against the reference (which the measurer runs
  // once and keeps) and timed with the tuning options, through the sandbox and here in turn.
  v1::MeasureOptions checked = default_tuning_measure_options();
  checked = with_defaults(checked);
  double job_sandboxed = 0, job_in_process = 0;
  for (int i = 0; i < job_trials; ++i) {
    auto begin = std::chrono::steady_clock::now();
    v1::MeasureResult r = (*measurer)->measure(probe->workload, checked, &probe->reference, probe->candidate);
    job_sandboxed += seconds_since(begin);
    begin = std::chrono::steady_clock::now();
    auto l = in_process(*probe, checked, true);
    job_in_process += seconds_since(begin);
    if (r.error() != v1::OK || !l.ok()) {
      fmt::print(stderr, "sandbox_bench: the job's trial failed: {} {}\n", r.error_msg(), l.status().to_string());
      return 1;
    }
  }
  fmt::print("a job of {} trials spends {:.2f} s measuring through the sandbox, {:.2f} s in process (+{:.2f} s)\n",
             job_trials, job_sandboxed, job_in_process, job_sandboxed - job_in_process);
  fmt::print("{{\"candidates\":{},\"per_candidate_ms\":{:.3f},\"per_candidate_no_namespaces_ms\":{:.3f},"
             "\"per_candidate_no_cgroups_ms\":{:.3f},\"cgroup_make_remove_ms\":{:.3f},"
             "\"in_process_ms\":{:.3f},\"sandbox_cost_ms\":{:.3f},\"rounds\":{},\"kernel_us_sandboxed\":{:.4f},"
             "\"kernel_us_in_process\":{:.4f},\"kernel_ratio\":{:.4f},\"job_trials\":{},\"job_s_sandboxed\":{:.3f},"
             "\"job_s_in_process\":{:.3f}}}\n",
             candidates, per_candidate_ms, bare_ms, uncontained_ms, cgroup_ms, in_process_ms, per_candidate_ms - in_process_ms, rounds,
             sandboxed_us, in_process_us, sandboxed_us / in_process_us, job_trials, job_sandboxed, job_in_process);
  return 0;
}

}  // namespace
}  // namespace tunefarm

int main(int argc, char** argv) {
  CLI::App app("sandbox_bench: what the measurement sandbox costs per candidate, and that kernels time the same");
  int candidates = 64;
  int rounds = 10;
  int job_trials = 64;
  app.add_option("--candidates", candidates, "Candidates run through the sandbox for its cost")->capture_default_str();
  app.add_option("--rounds", rounds, "Alternating timings of the probe kernel, sandboxed and in process")
      ->capture_default_str();
  app.add_option("--job-trials", job_trials, "Trials of the job whose measuring is timed both ways")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tunefarm::run(std::max(1, candidates), std::max(1, rounds), std::max(1, job_trials));
}
