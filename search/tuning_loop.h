// The tuning loop shared by local tuning and tunerd: propose a batch with the search, build the
// candidates on a thread pool, measure them through a MeasureBackend, teach the search the
// results, repeat — under a trial budget, a time budget and early stopping, with the budget of a
// multi-workload job shared by the task scheduler — and finally re-measure the best few candidates
// of each task, interleaved, before naming the winner.
//
// The loop knows nothing of the compiler or of gRPC: a TuningTask supplies the space, configs,
// features and artifacts of one workload, and a MeasureBackend measures artifacts (in a local
// sandbox, or on the farm through the tracker).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "common/target.h"
#include "common/workload.h"
#include "search/loop_counters.h"
#include "search/search.h"
#include "search/space.h"
#include "tunefarm/v1/common.pb.h"

namespace tunefarm {


// A measurement of a related workload (same template and target), for transfer learning.
struct HistoryRecord {
  std::string workload;  // Canonical workload string: labels are normalised per workload.
  Config config;
  double gflops = 0;
};

// One workload to tune, as the loop sees it.
class TuningTask {
 public:
  virtual ~TuningTask() = default;
  virtual const v1::Workload& workload() const = 0;
  virtual double flops() const = 0;
  virtual const SearchSpace& space() const = 0;
  virtual Config config_at(const Point& point) const = 0;
  // The point of a config of this task's space; INVALID_ARGUMENT for a foreign or invalid config.
  virtual StatusOr<Point> point_of(const Config& config) const = 0;
  virtual Status features(std::span<const Point> points, FeatureMatrix& out) const = 0;
  // The feature row of a config of the same template measured on another workload (transfer
  // learning), as wide as features(); an error for a record the task cannot describe.
  virtual StatusOr<std::vector<float>> history_features(const HistoryRecord& record) const = 0;
  // Builds one candidate; called from several threads at once.
  virtual StatusOr<v1::Artifact> build(const Point& point) const = 0;
  // A known-good kernel of the same workload whose output checks every candidate.
  virtual StatusOr<v1::Artifact> build_reference() const = 0;
  // The template's heuristic default, measured in the first batch so that tuning never ends
  // behind the untuned kernel; nothing when the template has none.
  virtual std::optional<Point> default_point() const { return std::nullopt; }
};

// Trains the cost model of `searcher` (which searches `task`) on related history before its first
// batch, so that the search starts ahead: labels are throughput relative to the fastest record of
// the same workload, and records the task cannot describe are left out. A no-op for strategies
// without a model.
Status warm_start_from_history(const TuningTask& task, Searcher& searcher, std::span<const HistoryRecord> history);

// Makes the tuning task of a workload (tunerd: compiler-backed tasks; tests: synthetic ones).
class TaskFactory {
 public:
  virtual ~TaskFactory() = default;
  // The tuning task of one workload on one target with the named template (empty: the operator's
  // default for the target). INVALID_ARGUMENT when there is no such template.
  virtual StatusOr<std::unique_ptr<TuningTask>> make_task(const Workload& workload, const Target& target,
                                                          const std::string& template_name) = 0;
};

// Measures built candidates somewhere.
class MeasureBackend {
 public:
  virtual ~MeasureBackend() = default;
  using ResultFn = std::function<void(size_t index, const v1::MeasureResult& result)>;
  // Measures every candidate and calls `on_result` exactly once per candidate (from any thread,
  // one call at a time) before returning. An error return means the backend itself failed.
  virtual Status measure(const v1::Workload& workload, const v1::MeasureOptions& options,
                         const v1::Artifact* reference, std::span<const v1::Artifact> candidates,
                         const ResultFn& on_result) = 0;
  // True when measuring uses this machine's CPUs: building then waits for measuring to finish, so
  // that compilation does not disturb the timings.
  virtual bool shares_host_cpu() const = 0;
  // Asks a measure() in progress, from another thread, to give up on the candidates not yet
  // measured (withdrawing them from wherever they queue); it then returns CANCELLED without
  // results for those. Backends that cannot withdraw work ignore it.
  virtual void cancel() {}

  // Sees what a measure() in progress waits for ("cannot reach the tracker ...", "no agent serves
  // key ..."), as it starts waiting, and an empty line once results come again. Set before measuring.
  using WaitFn = std::function<void(const std::string& why)>;
  void on_wait(WaitFn fn) { wait_fn_ = std::move(fn); }

 protected:
  void waiting(const std::string& why) const {
    if (wait_fn_) wait_fn_(why);
  }

 private:
  WaitFn wait_fn_;
};

struct TrialResult {
  int task = 0;
  Point point;
  Config config;
  v1::MeasureResult result;
  double gflops = 0;       // 0 unless the result is OK.
  double build_time_s = 0;
  int remeasure_round = 0; // 0: a trial; k > 0: the k-th round of the final re-measurement.
};

struct TuningOptions {
  int trials = 200;               // Over all tasks.
  double time_budget_s = 0;       // 0: none.
  // Time a resumed job already spent in earlier runs: it counts against time_budget_s and is part
  // of the elapsed time reported.
  double elapsed_before_s = 0;
  int early_stopping = 0;         // Per task: stop after this many trials without improvement; 0: never.
  int batch_size = 64;
  Strategy strategy = Strategy::kXgbSa;
  SearchOptions search;
  v1::MeasureOptions measure;
  // The best candidates per task measured again at the end: each config's figure is then the
  // upper median of its measurements (common/figure.h), and the winner the config with the best.
  int remeasure_top = 5;
  int remeasure_rounds = 3;       // Interleaved rounds of that re-measurement.
  // At most this share of the trial budget is spent re-measuring, over all tasks, so that the
  // re-measurement of a small job (or of a model's many tasks) does not take longer than its search.
  double remeasure_share = 1.0 / 3;
  // How long batches may come back with nothing measured (DEVICE_LOST: no agent of the key)
  // before the run fails with UNAVAILABLE; 0: no limit.
  double max_wait_s = 0;
  int build_threads = 0;          // 0: one per CPU.
  // Counts trials, re-measurements and builds as they happen (tunerd's metrics); null: none.
  std::shared_ptr<LoopCounters> metrics;
};

struct TaskOutcome {
  int trials = 0;                 // Distinct configs measured or failed, preloaded ones included.
  bool has_best = false;
  Config best_config;
  double best_gflops = 0;         // The winner's figure (common/figure.h).
  std::vector<double> best_costs; // The costs of the measurement that is the winner's figure.
};

// Where one task stands, for progress reports.
struct TaskProgress {
  int trials = 0;
  double best_gflops = 0;         // Its best figure so far (common/figure.h); 0 while none.
  double default_gflops = 0;      // The template's untuned default, once measured; 0 otherwise.
};

struct TuningProgress {
  int trials_done = 0;
  int trials_budget = 0;
  double best_gflops = 0;         // Over all tasks.
  double last_batch_gflops = 0;   // Best of the last batch.
  double elapsed_s = 0;
  std::vector<int> errors_by_code;  // Indexed by v1::ErrorCode.
  // Every candidate of the last batch came back DEVICE_LOST: no agent measured it (none serves the
  // key, or all were lost). Such candidates are not charged to the budget.
  bool waiting_for_devices = false;
  // Seconds from the start of this run to the first batch's results (building, queueing and
  // measuring it); 0 until they came.
  double first_batch_s = 0;
  int remeasured = 0;             // Re-measurements done (earlier runs' included) and planned;
  int remeasure_budget = 0;       // the plan is known once the search ended, an estimate before.
  std::string message;            // A line for people.
  std::vector<TaskProgress> tasks;  // One per task, in the loop's order.
};

// Why a run ended.
enum class StopReason { kTrialBudget, kTimeBudget, kEarlyStopping, kSpaceExhausted, kCancelled };
// "trial budget", "time budget", "early stopping", "space exhausted", "cancelled".
std::string_view stop_reason_name(StopReason reason);

// A re-measurement budget shared by tasks in proportion to their count x latency (0: none), at
// most `most` each.
std::vector<int> remeasure_shares(int budget, const std::vector<double>& weighted_latency, int most);

struct TuningOutcome {
  std::vector<TaskOutcome> tasks;
  int trials = 0;
  StopReason stop_reason = StopReason::kTrialBudget;
};

class TuningLoop {
 public:
  using ResultSink = std::function<void(const TrialResult&)>;
  using ProgressSink = std::function<void(const TuningProgress&)>;

  // `weights` (one per task, or empty for all 1) steer the task scheduler. The tasks and the
  // backend must outlive the loop.
  TuningLoop(std::vector<const TuningTask*> tasks, std::vector<double> weights, MeasureBackend& backend,
             TuningOptions options);
  ~TuningLoop();

  // Results of an earlier run of the same job: they count towards the budget, teach the search,
  // and are never measured again; its re-measurements (remeasure_round > 0) are kept, and only the
  // rounds still missing are measured at the end. Call before run().
  Status preload(int task, std::span<const TrialResult> results);

  // Trains the task's cost model on related history before its first batch, so that the search
  // starts ahead. A no-op for strategies without a model. Call before run().
  Status warm_start(int task, std::span<const HistoryRecord> history);

  // Runs to the end; `on_result` sees every new measurement (for the history: trials, then the
  // re-measurements of the best few), `on_progress` one update per batch and one after the
  // re-measurement. Thread-compatible: one run() at a time.
  StatusOr<TuningOutcome> run(const ResultSink& on_result, const ProgressSink& on_progress);

  // How many re-measurements the end of a run makes for `trials` trials over `tasks` tasks.
  static int remeasure_budget(const TuningOptions& options, int trials, int tasks);

  // Stops a running loop: the batch in flight is withdrawn from the backend (what was already
  // measured is reported and counts), and no new one starts. Safe from any thread. A time budget
  // that ends inside a batch withdraws it the same way.
  void cancel() {
    cancelled_.store(true);
    backend_.cancel();
  }

 private:
  struct TaskState;
  struct Batch;
  class InFlight;
  struct Run;

  // Batches until a stop reason holds; the batch in flight may still be measuring.
  StatusOr<StopReason> search(Run& run);
  // Waits for the batch in flight (withdrawing it when the time budget ends meanwhile) and
  // absorbs what it measured; a no-op without one.
  Status complete_in_flight(Run& run);
  // Why the run must end now, whatever the trial budget says.
  std::optional<StopReason> must_stop(const Run& run) const;
  // Sends `message` with the progress so far.
  void report(Run& run, std::string message);
  // How many candidates the next batch of `task` may have, with `remaining` trials left.
  int batch_size_for(int task, int remaining, const std::vector<bool>& exhausted, int in_flight_task) const;
  // Proposes up to `size` points of `task` and builds them.
  StatusOr<Batch> prepare_batch(int task, int size);
  // Measures a prepared batch; runs beside the next prepare_batch(), so it touches nothing else.
  Status measure_batch(Batch& batch, const ResultSink& on_result);
  // Keeps only the candidates of a withdrawn batch whose results were reported.
  static void drop_unreported(Batch& batch);
  // Teaches the search a measured batch and updates the task's best; on the loop's thread.
  Status absorb_batch(Batch& batch, TuningProgress& progress);
  // Measures the best few candidates of each task again, interleaved, the rounds an earlier run did
  // not, and names each task's winner by the figures of all their measurements.
  Status remeasure(Run& run);
  // One re-measurement of a kept candidate in `round`, unless it had that round already.
  Status remeasure_one(int task, int candidate, int round, const ResultSink& on_result);
  // Makes the template default one of the first `candidates` of `task` to re-measure: one more
  // while they are fewer than `slots`, else in place of the weakest.
  void include_default(int task, int& candidates, int slots);
  // The winner of `task` among its kept candidates, and the default's figure among them.
  void pick_winner(int task);
  // The known-good kernel that checks `task`'s candidates, once, when correctness is checked.
  Status build_reference(int task);

  std::vector<const TuningTask*> tasks_;
  std::vector<double> weights_;
  MeasureBackend& backend_;
  TuningOptions options_;
  std::vector<std::unique_ptr<TaskState>> state_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace tunefarm
