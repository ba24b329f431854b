#include "search/task_scheduler.h"

#include <cmath>

namespace tunefarm {

TaskScheduler::TaskScheduler(std::vector<double> weights, TaskSchedulerOptions options)
    : options_(options), rng_(options.seed) {
  for (double w : weights) tasks_.push_back(Task{.weight = w > 0 ? w : 1.0, .history = {}});
}

void TaskScheduler::record_round(int task, int trials, double best_latency_s) {
  Task& t = tasks_[task];
  t.handed_out = true;
  t.trials += trials;
  t.history.emplace_back(t.trials, best_latency_s);
}

double TaskScheduler::gradient(int task) const {
  const Task& t = tasks_[task];
  if (t.history.empty()) return std::numeric_limits<double>::infinity();
  double now = t.history.back().second;
  // Nothing has worked yet: the first success is worth more than any refinement elsewhere.
  if (!std::isfinite(now)) return std::numeric_limits<double>::max();
  double backward = 0;
  size_t back = t.history.size() > static_cast<size_t>(options_.window) ? t.history.size() - 1 - options_.window : 0;
  if (back < t.history.size() - 1) {
    auto [then_trials, then_latency] = t.history[back];
    if (!std::isfinite(then_latency)) then_latency = now * 2;  // It went from failing to working.
    int64_t dt = t.trials - then_trials;
    if (dt > 0) backward = (then_latency - now) / static_cast<double>(dt);
  }
  double forward = now / static_cast<double>(t.trials);
  return t.weight * (options_.alpha * backward + (1 - options_.alpha) * forward);
}

int TaskScheduler::next_task() {
  std::vector<int> open;
  for (int i = 0; i < static_cast<int>(tasks_.size()); ++i)
    if (!tasks_[i].finished) open.push_back(i);
  if (open.empty()) return -1;
  // Warm-up: every task gets a first round, in order; a round handed out counts even while it is
  // measured, so that the next task's round can be built meanwhile.
  for (int i : open)
    if (!tasks_[i].handed_out) {
      tasks_[i].handed_out = true;
      return i;
    }
  if (std::uniform_real_distribution<double>(0, 1)(rng_) < options_.epsilon)
    return open[std::uniform_int_distribution<size_t>(0, open.size() - 1)(rng_)];
  int best = open.front();
  for (int i : open)
    if (gradient(i) > gradient(best)) best = i;
  return best;
}

}  // namespace tunefarm
