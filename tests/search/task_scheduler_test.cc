#include "search/task_scheduler.h"

#include <cmath>

#include <gtest/gtest.h>

namespace tunefarm {
namespace {

TEST(TaskScheduler, WarmsUpEveryTaskThenFollowsTheLargestGain) {
  TaskSchedulerOptions options;
  options.epsilon = 0;
  TaskScheduler s({1.0, 1.0, 1.0}, options);
  const double first[] = {1e-3, 2e-3, 1e-3};
  for (int expected = 0; expected < 3; ++expected) {
    EXPECT_EQ(s.next_task(), expected);
    s.record_round(expected, 64, first[expected]);
  }
  // All three now stand at the same latency, but only task 1 got there by improving.
  s.record_round(1, 64, 1e-3);
  s.record_round(0, 64, 1e-3);
  s.record_round(2, 64, 1e-3);
  EXPECT_EQ(s.next_task(), 1);
  EXPECT_GT(s.gradient(1), s.gradient(0));
}

TEST(TaskScheduler, WeightsAndFailuresSteerTheBudget) {
  TaskSchedulerOptions options;
  options.epsilon = 0;
  TaskScheduler s({1.0, 10.0}, options);
  s.record_round(0, 64, 1e-3);
  s.record_round(1, 64, 1e-3);
  EXPECT_EQ(s.next_task(), 1);  // Same latency, ten times the weight.

  TaskScheduler f({1.0, 1.0}, options);
  f.record_round(0, 64, 1e-3);
  f.record_round(1, 64, std::numeric_limits<double>::infinity());
  EXPECT_EQ(f.next_task(), 1);  // Nothing works yet in task 1.
}

TEST(TaskScheduler, FinishedTasksGetNoRounds) {
  TaskScheduler s({1.0, 1.0});
  s.finish(0);
  EXPECT_EQ(s.next_task(), 1);
  s.finish(1);
  EXPECT_EQ(s.next_task(), -1);
}

TEST(TaskScheduler, SharesTrialsRoughlyByGainOverManyRounds) {
  // Task 0 is the slow layer of the model and keeps improving with each round; task 1 is already
  // ten times faster and stuck. Most of the budget goes to task 0, some still to task 1.
  TaskSchedulerOptions options;
  options.epsilon = 0;
  TaskScheduler s({1.0, 1.0}, options);
  double lat0 = 1e-3;
  for (int round = 0; round < 40; ++round) {
    int t = s.next_task();
    if (t == 0) lat0 *= 0.97;
    s.record_round(t, 32, t == 0 ? lat0 : 1e-4);
  }
  EXPECT_GT(s.trials(0), s.trials(1));
  EXPECT_GT(s.trials(1), 0);
}

}  // namespace
}  // namespace tunefarm
