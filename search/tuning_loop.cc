#include "search/tuning_loop.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <optional>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>

#include "common/figure.h"
#include "search/parallel_for.h"
#include "search/task_scheduler.h"

namespace tunefarm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

template <typename Costs>
double mean_of(const Costs& costs) {
  double s = 0;
  for (double c : costs) s += c;
  return costs.empty() ? 0 : s / costs.size();
}

double mean(const google::protobuf::RepeatedField<double>& costs) { return mean_of(costs); }

// The error code of a candidate that did not build.
v1::ErrorCode build_error(const Status& status) {
  return status.code() == StatusCode::kInvalidArgument ? v1::INVALID_CONFIG : v1::COMPILE_ERROR;
}

}  // namespace

struct TuningLoop::TaskState {
  std::unique_ptr<Searcher> searcher;
  std::optional<v1::Artifact> reference;
  int trials = 0;
  int since_improvement = 0;
  double best_gflops = 0;
  double default_gflops = 0;  // The template default's trial, once measured.
  // The best candidates so far by their trial, kept for the final re-measurement, and one more:
  // a config that was not re-measured keeps its trial as its figure and may still be the winner.
  struct Top {
    double gflops;
    Point point;
    std::optional<v1::Artifact> artifact;            // Built again when missing (a resumed job's).
    std::vector<std::vector<double>> measurements;  // The costs of each successful measurement.
    int rounds_done = 0;                             // Re-measurement rounds it had, earlier runs' included.
  };
  std::vector<Top> top;
  std::vector<double> best_costs;
  Point best_point;
  // The template default's trial: it is re-measured beside the best, one more candidate, so that
  // a tuned config wins only when it beats the default measured on the same terms.
  std::optional<Top> default_top;

  // Keeps the best `keep` candidates of `top`, the fastest first; of equals, the one already
  // re-measured, so that a resumed run keeps the candidates its earlier run was re-measuring.
  void trim_top(size_t keep) {
    std::stable_sort(top.begin(), top.end(), [](const Top& a, const Top& b) {
      return a.gflops != b.gflops ? a.gflops > b.gflops : a.rounds_done > b.rounds_done;
    });
    if (top.size() > keep) top.resize(keep);
  }
};

struct TuningLoop::Batch {
  int task = 0;
  std::vector<Point> points;
  std::vector<StatusOr<v1::Artifact>> artifacts;
  std::vector<double> build_times;
  std::vector<v1::Artifact> built;   // The artifacts that built, sent to the backend.
  std::vector<size_t> built_index;   // Their positions in `points`.
  std::vector<TrialResult> results;
  std::vector<bool> reported;        // Per point: its result was reported (a withdrawn batch has gaps).
};

// The batch measured on another thread while the loop proposes and builds the next one.
class TuningLoop::InFlight {
 public:
  bool active() const { return batch_.has_value(); }
  int task() const { return batch_ ? batch_->task : -1; }
  int size() const { return batch_ ? static_cast<int>(batch_->points.size()) : 0; }

  void start(Batch batch, std::function<Status(Batch&)> measure) {
    batch_ = std::move(batch);
    measuring_ = std::async(std::launch::async, [this, measure = std::move(measure)] { return measure(*batch_); });
  }
  // False when `seconds` passed before the measurement ended.
  bool wait_for(double seconds) {
    return measuring_.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready;
  }
  // The batch and how its measurement ended; nothing is in flight afterwards.
  std::pair<Batch, Status> take() {
    Status status = measuring_.get();
    Batch batch = std::move(*batch_);
    batch_.reset();
    return {std::move(batch), std::move(status)};
  }

 private:
  std::optional<Batch> batch_;
  std::future<Status> measuring_;
};

// What one run() tracks between its batches.
struct TuningLoop::Run {
  Run(std::vector<double> weights, TaskSchedulerOptions scheduling, const ResultSink& results,
      const ProgressSink& progress_sink, double elapsed_before)
      : scheduler(std::move(weights), scheduling), on_result(results), on_progress(progress_sink),
        elapsed_before_s(elapsed_before) {}
  double elapsed() const { return elapsed_before_s + seconds_since(start); }

  TaskScheduler scheduler;
  const ResultSink& on_result;
  const ProgressSink& on_progress;
  double elapsed_before_s;
  Clock::time_point start = Clock::now();
  TuningProgress progress;
  InFlight in_flight;
  std::vector<bool> exhausted;
  bool out_of_time = false;                          // The time budget ended inside a batch.
  std::optional<Clock::time_point> waiting_since;    // Since when batches measure nothing.
};


TuningLoop::TuningLoop(std::vector<const TuningTask*> tasks, std::vector<double> weights, MeasureBackend& backend,
                       TuningOptions options)
    : tasks_(std::move(tasks)), weights_(std::move(weights)), backend_(backend), options_(std::move(options)) {
  if (weights_.size() != tasks_.size()) weights_.assign(tasks_.size(), 1.0);
  for (size_t i = 0; i < tasks_.size(); ++i) {
    auto state = std::make_unique<TaskState>();
    SearchOptions search = options_.search;
    search.seed += i;  // Tasks explore independently.
    const TuningTask* task = tasks_[i];
    state->searcher = make_searcher(options_.strategy, task->space(), search,
                                    [task](std::span<const Point> p, FeatureMatrix& out) { return task->features(p, out); });
    if (auto p = task->default_point()) state->searcher->suggest({*p});
    state_.push_back(std::move(state));
  }
}

TuningLoop::~TuningLoop() = default;

Status TuningLoop::preload(int task, std::span<const TrialResult> results) {
  if (task < 0 || task >= static_cast<int>(tasks_.size()))
    return invalid_argument(fmt::format("task {} does not exist", task));
  TaskState& s = *state_[task];
  std::vector<Point> points;
  std::vector<double> gflops;
  std::unordered_set<int64_t> seen;
  const SearchSpace& space = tasks_[task]->space();
  std::vector<const TrialResult*> remeasured;
  for (const TrialResult& r : results) {
    TF_RETURN_IF_ERROR(space.check_range(r.point));
    if (r.remeasure_round > 0) {
      remeasured.push_back(&r);
      continue;
    }
    // The same config recorded twice (a result written just before a crash) counts once.
    if (s.searcher->visited(r.point) || !seen.insert(space.index_of(r.point)).second) continue;
    points.push_back(r.point);
    gflops.push_back(r.gflops);
    if (auto d = tasks_[task]->default_point(); d && *d == r.point && r.gflops > 0) {
      s.default_gflops = r.gflops;
      s.default_top = TaskState::Top{r.gflops, r.point, std::nullopt, {{r.result.costs().begin(), r.result.costs().end()}}};
    }
    if (r.gflops > s.best_gflops) {
      s.best_gflops = r.gflops;
      s.best_point = r.point;
      s.best_costs.assign(r.result.costs().begin(), r.result.costs().end());
    }
    if (r.gflops > 0) s.top.push_back({r.gflops, r.point, std::nullopt, {{r.result.costs().begin(), r.result.costs().end()}}});
  }
  // The earlier run's re-measurements join their candidates (the default's among them): only the
  // rounds they miss are measured.
  for (const TrialResult* r : remeasured) {
    std::vector<TaskState::Top*> holders;
    for (TaskState::Top& t : s.top)
      if (t.point == r->point) holders.push_back(&t);
    if (s.default_top && s.default_top->point == r->point) holders.push_back(&*s.default_top);
    for (TaskState::Top* t : holders) {
      t->rounds_done = std::max(t->rounds_done, r->remeasure_round);
      if (r->result.error() == v1::OK && !r->result.costs().empty())
        t->measurements.emplace_back(r->result.costs().begin(), r->result.costs().end());
    }
  }
  s.trim_top(static_cast<size_t>(std::max(0, options_.remeasure_top)) + 1);
  s.trials += static_cast<int>(points.size());
  return s.searcher->observe(points, gflops);
}

Status warm_start_from_history(const TuningTask& task, Searcher& searcher, std::span<const HistoryRecord> history) {
  std::map<std::string, double> best;  // Per workload: its fastest config is 1.0.
  for (const HistoryRecord& h : history) best[h.workload] = std::max(best[h.workload], h.gflops);
  FeatureMatrix x;
  std::vector<float> labels;
  for (const HistoryRecord& h : history) {
    double b = best[h.workload];
    if (b <= 0) continue;
    auto row = task.history_features(h);
    if (!row.ok()) continue;
    TF_RETURN_IF_ERROR(x.add_row(*row));
    labels.push_back(static_cast<float>(std::max(0.0, h.gflops) / b));
  }
  if (labels.empty()) return Status();
  return searcher.warm_start(x, labels);
}

Status TuningLoop::warm_start(int task, std::span<const HistoryRecord> history) {
  if (task < 0 || task >= static_cast<int>(tasks_.size()))
    return invalid_argument(fmt::format("task {} does not exist", task));
  return warm_start_from_history(*tasks_[task], *state_[task]->searcher, history);
}

Status TuningLoop::build_reference(int task) {
  TaskState& s = *state_[task];
  if (!options_.measure.check_correctness() || s.reference) return Status();
  TF_ASSIGN_OR_RETURN(v1::Artifact reference, tasks_[task]->build_reference());
  s.reference = std::move(reference);
  return Status();
}

StatusOr<TuningLoop::Batch> TuningLoop::prepare_batch(int task, int size) {
  Batch batch;
  batch.task = task;
  TF_ASSIGN_OR_RETURN(batch.points, state_[task]->searcher->propose(size));
  int n = static_cast<int>(batch.points.size());
  batch.artifacts.assign(n, StatusOr<v1::Artifact>(internal_error("not built")));
  batch.build_times.assign(n, 0.0);
  int threads = options_.build_threads > 0 ? options_.build_threads
                                           : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const TuningTask* t = tasks_[task];
  parallel_for(n, threads, [&](int i) {
    auto start = Clock::now();
    batch.artifacts[i] = t->build(batch.points[i]);
    batch.build_times[i] = seconds_since(start);
    if (options_.metrics)
      options_.metrics->built(batch.artifacts[i].ok() ? v1::OK : build_error(batch.artifacts[i].status()),
                              batch.build_times[i]);
  });
  return batch;
}

Status TuningLoop::measure_batch(Batch& batch, const ResultSink& on_result) {
  const TuningTask* t = tasks_[batch.task];
  TaskState& s = *state_[batch.task];
  TF_RETURN_IF_ERROR(build_reference(batch.task));
  batch.results.resize(batch.points.size());
  batch.reported.assign(batch.points.size(), false);
  for (size_t i = 0; i < batch.points.size(); ++i) {
    TrialResult& r = batch.results[i];
    r.task = batch.task;
    r.point = batch.points[i];
    r.config = t->config_at(r.point);
    r.build_time_s = batch.build_times[i];
    if (batch.artifacts[i].ok()) {
      batch.built.push_back(std::move(batch.artifacts[i].value()));
      batch.built_index.push_back(i);
    } else {
      const Status& st = batch.artifacts[i].status();
      r.result.set_error(build_error(st));
      r.result.set_error_msg(st.message());
      batch.reported[i] = true;
      on_result(r);
    }
  }
  if (batch.built.empty()) return Status();
  return backend_.measure(t->workload(), options_.measure, s.reference ? &*s.reference : nullptr, batch.built,
                          [&](size_t k, const v1::MeasureResult& result) {
                            TrialResult& r = batch.results[batch.built_index[k]];
                            batch.reported[batch.built_index[k]] = true;
                            r.result = result;
                            if (result.error() == v1::OK && !result.costs().empty() && mean(result.costs()) > 0)
                              r.gflops = t->flops() / mean(result.costs()) / 1e9;
                            on_result(r);
                          });
}

void TuningLoop::drop_unreported(Batch& batch) {
  size_t kept = 0;
  for (size_t i = 0; i < batch.points.size(); ++i) {
    if (!batch.reported[i]) continue;
    if (kept != i) {
      batch.points[kept] = std::move(batch.points[i]);
      batch.results[kept] = std::move(batch.results[i]);
      batch.reported[kept] = true;
    }
    ++kept;
  }
  batch.points.resize(kept);
  batch.results.resize(kept);
  batch.reported.resize(kept);
  // The artifacts kept for the re-measurement are matched by position: none are kept from a
  // withdrawn batch, which ends the run (and a cancelled or timed-out run does not re-measure).
  batch.built.clear();
  batch.built_index.clear();
}

Status TuningLoop::absorb_batch(Batch& batch, TuningProgress& progress) {
  TaskState& s = *state_[batch.task];
  std::vector<double> gflops;
  double batch_best = 0;
  // A DEVICE_LOST candidate was never measured: it costs no trial and teaches the search nothing.
  std::vector<Point> measured;
  int lost = 0;
  for (const TrialResult& r : batch.results) {
    if (r.result.error() == v1::DEVICE_LOST) {
      ++lost;
      if (options_.metrics) options_.metrics->unmeasured();
      continue;
    }
    if (options_.metrics) options_.metrics->trial(r.result.error());
    measured.push_back(r.point);
    gflops.push_back(r.gflops);
    batch_best = std::max(batch_best, r.gflops);
    progress.errors_by_code[r.result.error()]++;
    ++s.trials;
    if (auto d = tasks_[batch.task]->default_point(); d && *d == r.point) s.default_gflops = r.gflops;
    if (r.gflops > s.best_gflops) {
      s.best_gflops = r.gflops;
      s.best_point = r.point;
      s.best_costs.assign(r.result.costs().begin(), r.result.costs().end());
      s.since_improvement = 0;
    } else {
      ++s.since_improvement;
    }
  }
  auto default_point = tasks_[batch.task]->default_point();
  for (size_t k = 0; k < batch.built_index.size(); ++k) {
    const TrialResult& r = batch.results[batch.built_index[k]];
    if (r.gflops <= 0) continue;
    s.top.push_back({r.gflops, r.point, std::move(batch.built[k]),
                     {std::vector<double>(r.result.costs().begin(), r.result.costs().end())}});
    if (default_point && *default_point == r.point) s.default_top = s.top.back();
  }
  s.trim_top(static_cast<size_t>(std::max(0, options_.remeasure_top)) + 1);
  progress.last_batch_gflops = batch_best;
  progress.trials_done += static_cast<int>(measured.size());
  progress.waiting_for_devices = lost > 0 && measured.empty();
  if (measured.empty()) return Status();
  return s.searcher->observe(measured, gflops);
}

int TuningLoop::remeasure_budget(const TuningOptions& options, int trials, int tasks) {
  if (options.remeasure_top < 2 || options.remeasure_rounds <= 0) return 0;
  int most = options.remeasure_top * options.remeasure_rounds * std::max(1, tasks);
  return std::min(most, static_cast<int>(options.remeasure_share * trials));
}

// The re-measurement budget shared in proportion to each task's count x latency, no task above
// `most`, what a capped task leaves going to the others: on a model's job, an equal share gave each
// of MobileNetV3-Small's 43 tasks 3 re-measurements, the 0.1-3 us convolutions of its
// squeeze-and-excitation blocks as many as those that take the model's time.
std::vector<int> remeasure_shares(int budget, const std::vector<double>& weighted_latency, int most) {
  std::vector<int> shares(weighted_latency.size(), 0);
  std::vector<bool> capped(weighted_latency.size(), false);
  for (;;) {
    double total = 0;
    int left = budget;
    for (size_t i = 0; i < shares.size(); ++i) {
      if (capped[i]) left -= shares[i];
      else total += weighted_latency[i];
    }
    if (total <= 0 || left <= 0) return shares;
    bool newly_capped = false;
    for (size_t i = 0; i < shares.size(); ++i) {
      if (capped[i]) continue;
      // The ratio first, so that a task alone gets all that is left, not a rounding error less.
      double share = left * (weighted_latency[i] / total);
      if (share >= most) {
        shares[i] = most;
        capped[i] = newly_capped = true;
      } else {
        shares[i] = static_cast<int>(share);
      }
    }
    if (!newly_capped) return shares;
  }
}

Status TuningLoop::remeasure(Run& run) {
  // The plan: the job's re-measurement budget shared by the tasks that have two candidates or
  // more; each measures its best few in up to remeasure_rounds rounds within its share.
  size_t n = tasks_.size();
  std::vector<int> candidates(n, 0), rounds(n, 0);
  std::vector<double> weighted_latency(n, 0);
  for (size_t i = 0; i < n; ++i)
    if (state_[i]->top.size() >= 2 && state_[i]->best_gflops > 0)
      weighted_latency[i] = weights_[i] * tasks_[i]->flops() / (state_[i]->best_gflops * 1e9);
  std::vector<int> shares = remeasure_shares(remeasure_budget(options_, options_.trials, static_cast<int>(n)),
                                             weighted_latency, options_.remeasure_top * options_.remeasure_rounds);
  int max_rounds = 0;
  run.progress.remeasured = 0;
  run.progress.remeasure_budget = 0;
  for (size_t i = 0; i < n; ++i) {
    int share = shares[i];
    int available = static_cast<int>(std::min<size_t>(state_[i]->top.size(), std::max(0, options_.remeasure_top)));
    if (available < 2 || share < 2) continue;
    rounds[i] = options_.remeasure_rounds;
    if (share / rounds[i] < 2) rounds[i] = share / 2;
    int slots = share / rounds[i];
    candidates[i] = std::min(available, slots);
    include_default(static_cast<int>(i), candidates[i], slots);
    max_rounds = std::max(max_rounds, rounds[i]);
    run.progress.remeasure_budget += candidates[i] * rounds[i];
    for (int c = 0; c < candidates[i]; ++c) run.progress.remeasured += std::min(rounds[i], state_[i]->top[c].rounds_done);
  }
  // Interleaved: every candidate once per round, so that a slow phase of a noisy machine hits all
  // of them alike. Each measurement is recorded, as the trials are; a round an earlier run of the
  // job measured is not measured again.
  for (int round = 1; round <= max_rounds && !cancelled_.load(); ++round) {
    for (size_t i = 0; i < n && !cancelled_.load(); ++i) {
      if (round > rounds[i]) continue;
      TF_RETURN_IF_ERROR(build_reference(static_cast<int>(i)));
      for (int c = 0; c < candidates[i]; ++c) {
        if (state_[i]->top[c].rounds_done >= round) continue;
        TF_RETURN_IF_ERROR(remeasure_one(static_cast<int>(i), c, round, run.on_result));
        if (cancelled_.load()) break;
        ++run.progress.remeasured;
      }
    }
    report(run, fmt::format("re-measuring the best candidates: round {} of {}", round, max_rounds));
  }
  for (size_t i = 0; i < n; ++i)
    if (candidates[i] > 0) pick_winner(static_cast<int>(i));
  return Status();
}

void TuningLoop::include_default(int task, int& candidates, int slots) {
  TaskState& s = *state_[task];
  if (!s.default_top) return;
  auto it = std::find_if(s.top.begin(), s.top.end(), [&](const TaskState::Top& t) { return t.point == s.default_top->point; });
  if (it < s.top.begin() + candidates) return;
  // One more candidate while the task's share has room; otherwise it takes the weakest one's place.
  bool more = candidates < slots;
  auto at = s.top.begin() + (more ? candidates : candidates - 1);
  if (it == s.top.end()) s.top.insert(at, *s.default_top);
  else std::rotate(at, it, it + 1);
  if (more) ++candidates;
}

Status TuningLoop::remeasure_one(int task, int candidate, int round, const ResultSink& on_result) {
  const TuningTask* t = tasks_[task];
  TaskState& s = *state_[task];
  TaskState::Top& top = s.top[static_cast<size_t>(candidate)];
  if (top.rounds_done >= round) return Status();
  if (!top.artifact) {
    auto built = t->build(top.point);
    if (!built.ok()) return Status();  // It built before; a candidate that no longer does keeps its trial.
    top.artifact = std::move(*built);
  }
  std::span<const v1::Artifact> one(&*top.artifact, 1);
  Status st = backend_.measure(t->workload(), options_.measure, s.reference ? &*s.reference : nullptr, one,
                               [&](size_t, const v1::MeasureResult& result) {
                                 TrialResult r;
                                 r.task = task;
                                 r.point = top.point;
                                 r.config = t->config_at(top.point);
                                 r.result = result;
                                 r.remeasure_round = round;
                                 if (options_.metrics) options_.metrics->remeasurement(result.error());
                                 if (result.error() == v1::OK && mean(result.costs()) > 0) {
                                   r.gflops = t->flops() / mean(result.costs()) / 1e9;
                                   top.measurements.emplace_back(result.costs().begin(), result.costs().end());
                                 }
                                 on_result(r);
                               });
  if (st.code() == StatusCode::kCancelled && cancelled_.load()) return Status();
  TF_RETURN_IF_ERROR(st);
  top.rounds_done = round;
  return Status();
}

void TuningLoop::pick_winner(int task) {
  TaskState& s = *state_[task];
  // The winner by the one rule for a config's figure, over every config kept: the re-measured
  // ones and the best of the rest, whose single trial is its figure.
  const TaskState::Top* winner = nullptr;
  double winner_cost = 0;
  for (const TaskState::Top& top : s.top) {
    std::vector<double> means;
    for (const auto& costs : top.measurements) means.push_back(mean_of(costs));
    double cost = figure_cost(means);
    if (cost > 0 && (!winner || cost < winner_cost)) {
      winner = &top;
      winner_cost = cost;
    }
  }
  if (!winner) return;
  for (const TaskState::Top& top : s.top) {
    if (!s.default_top || !(top.point == s.default_top->point)) continue;
    std::vector<double> means;
    for (const auto& costs : top.measurements) means.push_back(mean_of(costs));
    if (double cost = figure_cost(means); cost > 0) s.default_gflops = tasks_[task]->flops() / cost / 1e9;
  }
  s.best_point = winner->point;
  s.best_gflops = tasks_[task]->flops() / winner_cost / 1e9;
  for (const auto& costs : winner->measurements)
    if (mean_of(costs) == winner_cost) s.best_costs = costs;
}

// Full batches, except for a task's first round in a job of several tasks. That round tells the
// scheduler how slow the task is (its default comes first), so it gets at most a quarter of an
// equal share of the budget, and no less than the default and one candidate: a 400-trial job
// over MobileNetV3-Small's 43 tasks in first rounds of 8 spent 344 trials on them (112 on the
// fourteen 1x1 convolutions of its squeeze-and-excitation blocks, under 2% of the model's time)
// and left the scheduler 56 to spend where the time is. Every task is reached: a 400-trial job
// over a model's 31 tasks in batches of 16 measured 25 tasks and never the last 6, job after job.
int TuningLoop::batch_size_for(int task, int remaining, const std::vector<bool>& exhausted, int in_flight_task) const {
  int size = std::min(options_.batch_size, remaining);
  if (state_[static_cast<size_t>(task)]->trials > 0 || tasks_.size() == 1) return size;
  int unstarted = 0;
  for (size_t i = 0; i < tasks_.size(); ++i)
    if (state_[i]->trials == 0 && !exhausted[i] && static_cast<int>(i) != in_flight_task) ++unstarted;
  unstarted = std::max(1, unstarted);
  constexpr int kFirstRoundLeast = 2;
  int first_round = std::max(kFirstRoundLeast, options_.trials / (4 * static_cast<int>(tasks_.size())));
  return std::max(1, std::min({size, first_round, remaining / unstarted}));
}

std::string_view stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kTrialBudget: return "trial budget";
    case StopReason::kTimeBudget: return "time budget";
    case StopReason::kEarlyStopping: return "early stopping";
    case StopReason::kSpaceExhausted: return "space exhausted";
    case StopReason::kCancelled: return "cancelled";
  }
  return "?";
}

void TuningLoop::report(Run& run, std::string message) {
  TuningProgress& p = run.progress;
  p.best_gflops = 0;
  p.tasks.resize(state_.size());
  for (size_t i = 0; i < state_.size(); ++i) {
    const TaskState& s = *state_[i];
    p.best_gflops = std::max(p.best_gflops, s.best_gflops);
    p.tasks[i] = {s.trials, s.best_gflops, s.default_gflops};
  }
  p.elapsed_s = run.elapsed();
  p.message = std::move(message);
  if (run.on_progress) run.on_progress(p);
}

std::optional<StopReason> TuningLoop::must_stop(const Run& run) const {
  if (cancelled_.load()) return StopReason::kCancelled;
  if (run.out_of_time || (options_.time_budget_s > 0 && run.elapsed() >= options_.time_budget_s))
    return StopReason::kTimeBudget;
  return std::nullopt;
}

Status TuningLoop::complete_in_flight(Run& run) {
  if (!run.in_flight.active()) return Status();
  if (options_.time_budget_s > 0 && !run.in_flight.wait_for(std::max(0.0, options_.time_budget_s - run.elapsed()))) {
    // The time budget ends inside this batch: what is not measured yet is withdrawn.
    run.out_of_time = true;
    backend_.cancel();
  }
  auto [batch, status] = run.in_flight.take();
  if (status.code() == StatusCode::kCancelled && (cancelled_.load() || run.out_of_time)) {
    // A withdrawn batch: its measured candidates were reported and count, the rest never ran.
    drop_unreported(batch);
    if (batch.points.empty()) return Status();
    status = Status();
  }
  TF_RETURN_IF_ERROR(status);
  TF_RETURN_IF_ERROR(absorb_batch(batch, run.progress));
  if (!run.progress.waiting_for_devices) {
    run.waiting_since.reset();
    if (run.progress.first_batch_s == 0) run.progress.first_batch_s = seconds_since(run.start);
  } else if (!run.waiting_since) {
    run.waiting_since = Clock::now();
  } else if (options_.max_wait_s > 0 && seconds_since(*run.waiting_since) > options_.max_wait_s) {
    return unavailable(fmt::format("no agent measured anything for {:.0f} s (the job's limit, --max-wait)",
                                   seconds_since(*run.waiting_since)));
  }
  const TaskState& s = *state_[batch.task];
  run.scheduler.record_round(batch.task, static_cast<int>(batch.points.size()),
                             s.best_gflops > 0 ? tasks_[batch.task]->flops() / (s.best_gflops * 1e9) : INFINITY);
  if (options_.early_stopping > 0 && s.since_improvement >= options_.early_stopping) run.scheduler.finish(batch.task);
  report(run, fmt::format("task {}: {} trials, best {:.1f} GFLOP/s", batch.task, s.trials, s.best_gflops));
  return Status();
}

// Measuring batch n overlaps with proposing and building batch n+1, unless both would compete for
// this machine's CPUs, or batch n+1 is for the same task and its searcher learns: planning and
// building a batch take well under a second and measuring it many, but a model one batch behind
// costs a whole batch of trials (xgb-sa's first guided batch would be the third).
StatusOr<StopReason> TuningLoop::search(Run& run) {
  for (;;) {
    if (backend_.shares_host_cpu()) TF_RETURN_IF_ERROR(complete_in_flight(run));
    if (auto why = must_stop(run)) return *why;
    int planned = run.progress.trials_done + run.in_flight.size();
    if (planned >= options_.trials) return StopReason::kTrialBudget;
    int task = run.scheduler.next_task();
    if (task < 0) {
      TF_RETURN_IF_ERROR(complete_in_flight(run));
      task = run.scheduler.next_task();  // The batch that just ended may have changed the picture.
      if (task < 0)
        return std::all_of(run.exhausted.begin(), run.exhausted.end(), [](bool b) { return b; })
                   ? StopReason::kSpaceExhausted
                   : StopReason::kEarlyStopping;
    }
    if (run.in_flight.task() == task && state_[task]->searcher->learns()) {
      // Its round is recorded once it ends: during the warm-up that hands the next round to another task.
      TF_RETURN_IF_ERROR(complete_in_flight(run));
      continue;
    }
    TF_ASSIGN_OR_RETURN(Batch batch, prepare_batch(task, batch_size_for(task, options_.trials - planned, run.exhausted,
                                                                        run.in_flight.task())));
    if (batch.points.empty()) {
      run.exhausted[task] = true;
      run.scheduler.finish(task);
      continue;
    }
    TF_RETURN_IF_ERROR(complete_in_flight(run));
    // A cancel (or the end of the time budget) that came while this batch was built wins: it is
    // dropped unmeasured.
    if (auto why = must_stop(run)) return *why;
    run.in_flight.start(std::move(batch), [this, &run](Batch& b) { return measure_batch(b, run.on_result); });
  }
}

StatusOr<TuningOutcome> TuningLoop::run(const ResultSink& on_result, const ProgressSink& on_progress) {
  if (tasks_.empty()) return invalid_argument("a tuning run needs at least one task");
  if (options_.trials <= 0) return invalid_argument(fmt::format("trial budget {} must be positive", options_.trials));
  if (options_.batch_size <= 0) return invalid_argument(fmt::format("batch size {} must be positive", options_.batch_size));
  TaskSchedulerOptions scheduling;
  scheduling.seed = options_.search.seed;
  Run run(weights_, scheduling, on_result, on_progress, options_.elapsed_before_s);
  run.exhausted.assign(tasks_.size(), false);
  run.progress.trials_budget = options_.trials;
  run.progress.errors_by_code.assign(v1::ErrorCode_ARRAYSIZE, 0);
  run.progress.remeasure_budget = remeasure_budget(options_, options_.trials, static_cast<int>(tasks_.size()));
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const TaskState& s = *state_[i];
    run.progress.trials_done += s.trials;
    if (s.trials > 0)
      run.scheduler.record_round(static_cast<int>(i), s.trials,
                                 s.best_gflops > 0 ? tasks_[i]->flops() / (s.best_gflops * 1e9) : INFINITY);
  }

  StatusOr<StopReason> searched = search(run);
  Status measured = complete_in_flight(run);
  if (!searched.ok()) return searched.status();
  TF_RETURN_IF_ERROR(measured);
  StopReason why = *searched;
  if (run.out_of_time && why != StopReason::kCancelled) why = StopReason::kTimeBudget;
  // A spent time budget leaves no time for re-measuring: the winner is the best trial.
  if (why != StopReason::kCancelled && why != StopReason::kTimeBudget && !cancelled_.load())
    TF_RETURN_IF_ERROR(remeasure(run));
  report(run, fmt::format("{}: {} trials", stop_reason_name(why), run.progress.trials_done));

  TuningOutcome outcome;
  outcome.stop_reason = why;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const TaskState& s = *state_[i];
    TaskOutcome t;
    t.trials = s.trials;
    t.has_best = s.best_gflops > 0;
    if (t.has_best) {
      t.best_config = tasks_[i]->config_at(s.best_point);
      t.best_gflops = s.best_gflops;
      t.best_costs = s.best_costs;
    }
    outcome.trials += s.trials;
    outcome.tasks.push_back(std::move(t));
  }
  return outcome;
}

}  // namespace tunefarm
