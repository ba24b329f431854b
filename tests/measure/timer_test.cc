#include "measure/timer.h"

#include <gtest/gtest.h>

#include "measure/measure_options.h"
#include "measure/stream_speed.h"

namespace tunefarm {
namespace {

// Each run "takes" a fixed 0.1 ms; records what the timer asked for.
class FakeKernel : public BoundKernel {
 public:
  Status run_once() override { return Status(); }
  Status copy_outputs(std::vector<HostTensor>&) override { return Status(); }
  StatusOr<double> time_runs(int number) override {
    numbers.push_back(number);
    return number * 1e-4;
  }
  void flush_cache() override { ++flushes; }
  std::vector<int> numbers;
  int flushes = 0;
};

TEST(Timer, FixedNumberGivesOneCostPerRepeat) {
  FakeKernel k;
  v1::MeasureOptions o;
  o.set_number(5);
  o.set_repeat(4);
  auto costs = time_kernel(k, with_defaults(o));
  ASSERT_TRUE(costs.ok());
  ASSERT_EQ(costs->size(), 4u);
  EXPECT_DOUBLE_EQ((*costs)[0], 1e-4);
  EXPECT_EQ(k.numbers, std::vector<int>({5, 5, 5, 5}));
  EXPECT_EQ(k.flushes, 0);
}

TEST(Timer, MinRepeatMsGrowsNumberToASampleAndFlushesBeforeEverySample) {
  FakeKernel k;
  v1::MeasureOptions o;
  o.set_repeat(3);
  o.set_min_repeat_ms(10);
  o.set_flush_cache(true);
  auto costs = time_kernel(k, with_defaults(o));
  ASSERT_TRUE(costs.ok());
  ASSERT_EQ(costs->size(), 3u);
  for (double c : *costs) EXPECT_DOUBLE_EQ(c, 1e-4);
  // A sample of kSampleSeconds at 0.1 ms per run needs at least 5 runs; once found, number stays,
  // and each repeat of 10 ms takes several samples.
  EXPECT_GE(k.numbers.back(), static_cast<int>(kSampleSeconds / 1e-4));
  EXPECT_LT(k.numbers.back(), 100);
  int runs = 0;
  for (int n : k.numbers) runs += n;
  EXPECT_GE(runs, 3 * 100) << "three repeats of 10 ms";
  EXPECT_EQ(k.flushes, static_cast<int>(k.numbers.size()));
}

// Every third sample is interrupted for 2 ms, as by another process's time slice.
class InterruptedKernel : public FakeKernel {
 public:
  StatusOr<double> time_runs(int number) override {
    double seconds = number * 1e-4;
    return ++calls % 3 == 0 ? seconds + 2e-3 : seconds;
  }
  int calls = 0;
};

TEST(Timer, ARepeatIsTheMedianOfItsSamplesNotTheirMean) {
  InterruptedKernel k;
  v1::MeasureOptions o;
  o.set_repeat(2);
  o.set_min_repeat_ms(20);
  auto costs = time_kernel(k, with_defaults(o));
  ASSERT_TRUE(costs.ok());
  ASSERT_EQ(costs->size(), 2u);
  for (double c : *costs) EXPECT_DOUBLE_EQ(c, 1e-4);
}

TEST(Timer, WithoutMinRepeatMsARepeatIsOneWindowAsInAutoTvm) {
  InterruptedKernel k;
  v1::MeasureOptions o;
  o.set_number(10);
  o.set_repeat(3);
  auto costs = time_kernel(k, with_defaults(o));
  ASSERT_TRUE(costs.ok());
  ASSERT_EQ(costs->size(), 3u);
  EXPECT_DOUBLE_EQ((*costs)[2], (10 * 1e-4 + 2e-3) / 10);
}

TEST(Timer, DefaultsFillZeros) {
  v1::MeasureOptions o = with_defaults(v1::MeasureOptions());
  EXPECT_EQ(o.number(), 1);
  EXPECT_EQ(o.repeat(), kDefaultRepeat);
  EXPECT_DOUBLE_EQ(o.timeout_s(), kDefaultTimeoutS);
  EXPECT_DOUBLE_EQ(o.rtol(), kDefaultRtol);
}

// The agent and a tuning job fill the fields a request leaves at zero from one set of defaults;
// a job only adds longer repeats and the correctness check.
TEST(MeasureOptions, TuningDefaultsAreTheRequestDefaultsWithLongerRepeatsAndTheCheck) {
  v1::MeasureOptions tuning = default_tuning_measure_options();
  v1::MeasureOptions request = default_measure_options();
  EXPECT_EQ(tuning.rtol(), request.rtol());
  EXPECT_EQ(tuning.atol(), request.atol());
  EXPECT_EQ(tuning.repeat(), request.repeat());
  EXPECT_EQ(tuning.timeout_s(), request.timeout_s());
  EXPECT_EQ(tuning.min_repeat_ms(), kDefaultTuningMinRepeatMs);
  EXPECT_TRUE(tuning.check_correctness());
}

TEST(MeasureOptions, FillUnsetTakesZerosFromTheDefaultsAndKeepsTheBooleansGiven) {
  v1::MeasureOptions given;
  given.set_repeat(7);
  given.set_number(-2);
  given.set_check_correctness(false);
  v1::MeasureOptions filled = fill_unset(given, default_tuning_measure_options());
  EXPECT_EQ(filled.repeat(), 7);
  EXPECT_EQ(filled.number(), 0);
  EXPECT_EQ(filled.min_repeat_ms(), kDefaultTuningMinRepeatMs);
  EXPECT_EQ(filled.rtol(), kDefaultRtol);
  EXPECT_FALSE(filled.check_correctness()) << "false is the spec's choice, not a gap";
}

// The stream figure an agent reports is a speed a CPU's caches have: more than a gigabyte a second
// (a loop that did not run, or ran scalar on a board, would say less), less than ten terabytes.
TEST(StreamSpeed, IsASpeedTheCachesHave) {
  double speed = measure_stream_bytes_per_s();
  EXPECT_GT(speed, 1e9);
  EXPECT_LT(speed, 1e13);
}

}  // namespace
}  // namespace tunefarm
