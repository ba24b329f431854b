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
    v1::Artifact artifact;
    std::vector<std::vector<double>> measurements;  // The costs of each successful measurement.
  };
  std::vector<Top> top;
  std::vector<double> best_costs;
  Point best_point;
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
  for (const TrialResult& r : results) {
    TF_RETURN_IF_ERROR(space.check_range(r.point));
    // The same config recorded twice (a result written just before a crash) counts once.
    if (s.searcher->visited(r.point) || !seen.insert(space.index_of(r.point)).second) continue;
    points.push_back(r.point);
    gflops.push_back(r.gflops);
    if (r.gflops > s.best_gflops) {
      s.best_gflops = r.gflops;
      s.best_point = r.point;
      s.best_costs.assign(r.result.costs().begin(), r.result.costs().end());
    }
  }
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
  if (options_.measure.check_correctness() && !s.reference) {
    TF_ASSIGN_OR_RETURN(v1::Artifact reference, t->build_reference());
    s.reference = std::move(reference);
  }
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
  for (size_t k = 0; k < batch.built_index.size(); ++k) {
    const TrialResult& r = batch.results[batch.built_index[k]];
    if (r.gflops > 0)
      s.top.push_back({r.gflops, r.point, std::move(batch.built[k]),
                       {std::vector<double>(r.result.costs().begin(), r.result.costs().end())}});
  }
  std::sort(s.top.begin(), s.top.end(), [](const auto& a, const auto& b) { return a.gflops > b.gflops; });
  size_t keep = static_cast<size_t>(std::max(0, options_.remeasure_top)) + 1;
  if (s.top.size() > keep) s.top.resize(keep);
  progress.last_batch_gflops = batch_best;
  progress.trials_done += static_cast<int>(measured.size());
  progress.waiting_for_devices = lost > 0 && measured.empty();
  if (measured.empty()) return Status();
  return s.searcher->observe(measured, gflops);
}

Status TuningLoop::remeasure(int task, const ResultSink& on_result) {
  TaskState& s = *state_[task];
  size_t candidates = std::min(s.top.size(), static_cast<size_t>(std::max(0, options_.remeasure_top)));
  if (candidates < 2 || options_.remeasure_rounds <= 0) return Status();
  const TuningTask* t = tasks_[task];
  // Interleaved: every candidate once per round, so that a slow phase of a noisy machine hits all
  // of them alike. Each measurement is recorded, as the trials are.
  for (int round = 1; round <= options_.remeasure_rounds && !cancelled_.load(); ++round) {
    for (size_t c = 0; c < candidates; ++c) {
      TaskState::Top& top = s.top[c];
      std::span<const v1::Artifact> one(&top.artifact, 1);
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
      if (st.code() == StatusCode::kCancelled && cancelled_.load()) break;
      TF_RETURN_IF_ERROR(st);
    }
  }
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
  if (winner) {
    s.best_point = winner->point;
    s.best_gflops = t->flops() / winner_cost / 1e9;
    for (const auto& costs : winner->measurements)
      if (mean_of(costs) == winner_cost) s.best_costs = costs;
  }
  return Status();
}

// Full batches, except while tasks that have not been measured yet would be left without any:
// then each of them gets an equal share of what is left (a 400-trial job over a model's 31 tasks
// in batches of 16 measured 25 tasks and never reached the last 6, job after job).
int TuningLoop::batch_size_for(int task, int remaining, const std::vector<bool>& exhausted, int in_flight_task) const {
  int size = std::min(options_.batch_size, remaining);
  if (state_[static_cast<size_t>(task)]->trials > 0) return size;
  int unstarted = 0;
  for (size_t i = 0; i < tasks_.size(); ++i)
    if (state_[i]->trials == 0 && !exhausted[i] && static_cast<int>(i) != in_flight_task) ++unstarted;
  return std::max(1, std::min(size, remaining / std::max(1, unstarted)));
}

StatusOr<TuningOutcome> TuningLoop::run(const ResultSink& on_result, const ProgressSink& on_progress) {
  if (tasks_.empty()) return invalid_argument("a tuning run needs at least one task");
  if (options_.trials <= 0) return invalid_argument(fmt::format("trial budget {} must be positive", options_.trials));
  if (options_.batch_size <= 0) return invalid_argument(fmt::format("batch size {} must be positive", options_.batch_size));
  auto start = Clock::now();
  auto elapsed = [&] { return options_.elapsed_before_s + seconds_since(start); };

  TaskSchedulerOptions sched_options;
  sched_options.seed = options_.search.seed;
  TaskScheduler scheduler(weights_, sched_options);
  TuningProgress progress;
  progress.trials_budget = options_.trials;
  progress.errors_by_code.assign(v1::ErrorCode_ARRAYSIZE, 0);
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const TaskState& s = *state_[i];
    progress.trials_done += s.trials;
    if (s.trials > 0)
      scheduler.record_round(static_cast<int>(i), s.trials,
                             s.best_gflops > 0 ? tasks_[i]->flops() / (s.best_gflops * 1e9) : INFINITY);
  }

  auto best_overall = [&] {
    double b = 0;
    progress.tasks.resize(state_.size());
    for (size_t i = 0; i < state_.size(); ++i) {
      const TaskState& s = *state_[i];
      b = std::max(b, s.best_gflops);
      progress.tasks[i] = {s.trials, s.best_gflops, s.default_gflops};
    }
    return b;
  };
  auto finish_round = [&](const Batch& batch) {
    const TaskState& s = *state_[batch.task];
    scheduler.record_round(batch.task, static_cast<int>(batch.points.size()),
                           s.best_gflops > 0 ? tasks_[batch.task]->flops() / (s.best_gflops * 1e9) : INFINITY);
    if (options_.early_stopping > 0 && s.since_improvement >= options_.early_stopping) scheduler.finish(batch.task);
    progress.best_gflops = best_overall();
    progress.elapsed_s = elapsed();
    progress.message = fmt::format("task {}: {} trials, best {:.1f} GFLOP/s", batch.task, s.trials, s.best_gflops);
    if (on_progress) on_progress(progress);
  };

  // Measuring batch n overlaps with proposing and building batch n+1, unless both would compete
  // for this machine's CPUs, or batch n+1 is for the same task and its searcher learns: planning
  // and building a batch take well under a second and measuring it many, but a model one batch
  // behind costs a whole batch of trials (xgb-sa's first guided batch would be the third).
  std::optional<Batch> in_flight;
  std::future<Status> measuring;
  bool out_of_time = false;
  auto complete_in_flight = [&]() -> Status {
    if (!in_flight) return Status();
    if (options_.time_budget_s > 0) {
      double left = std::max(0.0, options_.time_budget_s - elapsed());
      if (measuring.wait_for(std::chrono::duration<double>(left)) == std::future_status::timeout) {
        // The time budget ends inside this batch: what is not measured yet is withdrawn.
        out_of_time = true;
        backend_.cancel();
      }
    }
    Status st = measuring.get();
    Batch done = std::move(*in_flight);
    in_flight.reset();
    if (st.code() == StatusCode::kCancelled && (cancelled_.load() || out_of_time)) {
      // A withdrawn batch: its measured candidates were reported and count, the rest never ran.
      drop_unreported(done);
      if (done.points.empty()) return Status();
      st = Status();
    }
    TF_RETURN_IF_ERROR(st);
    TF_RETURN_IF_ERROR(absorb_batch(done, progress));
    finish_round(done);
    return Status();
  };

  // Why the run must end now, whatever the trial budget says; empty while it may go on.
  auto must_stop = [&]() -> std::string {
    if (cancelled_.load()) return "cancelled";
    if (out_of_time || (options_.time_budget_s > 0 && elapsed() >= options_.time_budget_s)) return "time budget";
    return "";
  };

  TuningOutcome outcome;
  std::vector<bool> exhausted(tasks_.size(), false);
  for (;;) {
    if (backend_.shares_host_cpu()) TF_RETURN_IF_ERROR(complete_in_flight());
    int planned = progress.trials_done + (in_flight ? static_cast<int>(in_flight->points.size()) : 0);
    if (std::string why = must_stop(); !why.empty()) {
      outcome.stop_reason = why;
      break;
    }
    if (planned >= options_.trials) { outcome.stop_reason = "trial budget"; break; }
    int task = scheduler.next_task();
    if (task < 0) {
      TF_RETURN_IF_ERROR(complete_in_flight());
      task = scheduler.next_task();  // The batch that just ended may have changed the picture.
      if (task < 0) {
        bool all_exhausted = std::all_of(exhausted.begin(), exhausted.end(), [](bool b) { return b; });
        outcome.stop_reason = all_exhausted ? "space exhausted" : "early stopping";
        break;
      }
    }
    if (in_flight && in_flight->task == task && state_[task]->searcher->learns()) {
      TF_RETURN_IF_ERROR(complete_in_flight());
      // Its round is now recorded: during the warm-up that hands the next round to another task.
      continue;
    }
    auto batch = prepare_batch(task, batch_size_for(task, options_.trials - planned, exhausted,
                                                    in_flight ? in_flight->task : -1));
    if (!batch.ok()) {
      (void)complete_in_flight();
      return batch.status();
    }
    if (batch->points.empty()) {
      exhausted[task] = true;
      scheduler.finish(task);
      continue;
    }
    TF_RETURN_IF_ERROR(complete_in_flight());
    // A cancel (or the end of the time budget) that came while this batch was built wins: it is
    // dropped unmeasured.
    if (std::string why = must_stop(); !why.empty()) {
      outcome.stop_reason = why;
      break;
    }
    in_flight = std::move(*batch);
    measuring = std::async(std::launch::async, [this, &in_flight, &on_result] {
      return measure_batch(*in_flight, on_result);
    });
  }
  TF_RETURN_IF_ERROR(complete_in_flight());
  if (out_of_time && outcome.stop_reason != "cancelled") outcome.stop_reason = "time budget";

  // A spent time budget leaves no time for re-measuring: the winner is the best trial.
  if (!cancelled_.load() && outcome.stop_reason != "time budget") {
    for (size_t i = 0; i < tasks_.size(); ++i) TF_RETURN_IF_ERROR(remeasure(static_cast<int>(i), on_result));
    progress.best_gflops = best_overall();
    progress.elapsed_s = elapsed();
    progress.message = "re-measured the best candidates of each task";
    if (on_progress) on_progress(progress);
  }
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
