// Shares one trial budget between the tasks of a multi-workload job. After every task has had a
// first round, each round goes to the task whose weighted latency is expected to fall the most per
// trial — the gradient-based rule of Ansor and MetaSchedule: a backward-looking term (how much the
// task's best latency fell over its last rounds) blended with an optimistic forward term (the
// latency still to gain, spread over the trials already spent), times the task's weight.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace tunefarm {

struct TaskSchedulerOptions {
  double alpha = 0.2;      // Weight of the backward-looking gradient.
  int window = 3;          // Rounds the backward gradient looks back over.
  double epsilon = 0.05;   // Share of rounds given to a random unfinished task.
  uint64_t seed = 1;
};

class TaskScheduler {
 public:
  TaskScheduler(std::vector<double> weights, TaskSchedulerOptions options = {});

  // The task that gets the next round, or -1 when every task is finished.
  int next_task();

  // A round of `trials` measurements of `task` ended; `best_latency_s` is its best so far
  // (infinity while nothing succeeded).
  void record_round(int task, int trials, double best_latency_s);

  // No more rounds for this task (space exhausted, early-stopped).
  void finish(int task) { tasks_[task].finished = true; }
  bool finished(int task) const { return tasks_[task].finished; }

  int64_t trials(int task) const { return tasks_[task].trials; }
  double gradient(int task) const;

 private:
  struct Task {
    double weight;
    int64_t trials = 0;
    bool finished = false;
    bool handed_out = false;  // Its first round was given out (it may still be measuring).
    std::vector<std::pair<int64_t, double>> history;  // (trials so far, best latency) per round.
  };
  std::vector<Task> tasks_;
  TaskSchedulerOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace tunefarm
