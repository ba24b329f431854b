// The farm end to end with real processes on 127.0.0.1: trackerd, device-agents and a tuner's
// Measure calls.
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "tests/integration/farm_harness.h"

namespace tunefarm::testing {
namespace {

class FarmTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure()) std::cout << farm_.logs();
  }
  Farm farm_;
};

TEST_F(FarmTest, TwoAgentsMeasureABatchOf32) {
  farm_.start_agent("a1");
  farm_.start_agent("a2");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 2, std::chrono::seconds(10)));
  MeasureOutcome out = farm_.measure(kernel_request("matmul", 32));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_EQ(out.results.size(), 32u);
  std::set<uint64_t> ids;
  std::set<std::string> agents;
  for (const auto& r : out.results) {
    ids.insert(r.candidate_id());
    agents.insert(r.result().agent_id());
    EXPECT_EQ(r.result().error(), v1::OK) << r.result().error_msg();
    EXPECT_EQ(r.result().costs_size(), 2);
  }
  EXPECT_EQ(ids.size(), 32u);
  EXPECT_EQ(agents, std::set<std::string>({"a1", "a2"}));
  // The last result may overtake its agent's BatchDone.
  v1::QueueStatusResponse status;
  for (int i = 0; i < 100; ++i) {
    status = farm_.queue_status();
    if (status.keys_size() == 1 && status.keys(0).agents_free() == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(status.keys_size(), 1);
  int64_t batches = 0;
  for (const auto& a : status.keys(0).agents()) batches += a.batches_done();
  EXPECT_GE(batches, 4);
  EXPECT_EQ(status.keys(0).agents_free(), 2);
}

TEST_F(FarmTest, WrongAnswerIsReportedAsSuch) {
  farm_.start_agent("a1");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(10)));
  MeasureOutcome out = farm_.measure(kernel_request("matmul_wrong", 2));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_EQ(out.results.size(), 2u);
  for (const auto& r : out.results) {
    EXPECT_EQ(r.result().error(), v1::WRONG_ANSWER);
    EXPECT_NE(r.result().error_msg().find("differ"), std::string::npos) << r.result().error_msg();
  }
}

TEST_F(FarmTest, SameKernelOnTwoAgentsOfOneKeyAgrees) {
  farm_.start_agent("a1");
  farm_.start_agent("a2");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 2, std::chrono::seconds(10)));
  // One candidate per request: the tracker hands consecutive requests to the agents in turn, so
  // the two measure interleaved (A B A B ...), never at once, as BASELINES.md asks of comparisons
  // on this shared machine. Up to three rounds of 20, 100 costs per agent and round; every
  // round's spread is printed.
  v1::MeasureRequest request = kernel_request("matmul", 1);
  request.mutable_options()->set_number(0);
  request.mutable_options()->set_min_repeat_ms(10);
  request.mutable_options()->set_repeat(10);
  double best_spread = 1e9;
  for (int round = 0; round < 3 && best_spread >= 0.10; ++round) {
    std::map<std::string, std::vector<double>> costs;
    for (int i = 0; i < 20; ++i) {
      MeasureOutcome out = farm_.measure(request);
      ASSERT_TRUE(out.status.ok()) << out.status.error_message();
      ASSERT_EQ(out.results.size(), 1u);
      const v1::MeasureResult& r = out.results[0].result();
      ASSERT_EQ(r.error(), v1::OK) << r.error_msg();
      for (double c : r.costs()) costs[r.agent_id()].push_back(c);
    }
    ASSERT_EQ(costs.size(), 2u);
    std::vector<double> medians;
    for (auto& [agent, values] : costs) {
      std::sort(values.begin(), values.end());
      medians.push_back(values[values.size() / 2]);
    }
    double spread = std::fabs(medians[0] - medians[1]) / std::min(medians[0], medians[1]);
    std::cout << "round " << round << ": medians " << medians[0] * 1e6 << " us and " << medians[1] * 1e6
              << " us, spread " << spread * 100 << "%\n";
    best_spread = std::min(best_spread, spread);
  }
  RecordProperty("median_spread_percent", std::to_string(best_spread * 100));
  EXPECT_LT(best_spread, 0.10);
}

TEST_F(FarmTest, TrackerRestartGetsItsAgentsBackAndARetriedBatchCompletes) {
  farm_.start_agent("a1");
  farm_.start_agent("a2");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 2, std::chrono::seconds(10)));
  v1::MeasureRequest request = kernel_request("matmul", 16);
  request.mutable_options()->set_number(0);
  request.mutable_options()->set_min_repeat_ms(40);
  bool killed = false;
  MeasureOutcome first = farm_.measure(request, [&](const v1::MeasureResponse&, int count) {
    if (count == 2 && !killed) {
      killed = true;
      farm_.kill_tracker(SIGKILL);
    }
  });
  ASSERT_TRUE(killed);
  EXPECT_FALSE(first.status.ok());
  EXPECT_EQ(first.status.error_code(), grpc::StatusCode::UNAVAILABLE) << first.status.error_message();

  auto restarted = std::chrono::steady_clock::now();
  farm_.start_tracker();
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 2, std::chrono::seconds(5)));
  double back_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - restarted).count();
  std::cout << "agents back " << back_s << " s after the restart\n";
  EXPECT_LT(back_s, 5.0);
  // The tuner retries its whole batch; the new tracker knows nothing of the old one.
  MeasureOutcome retry = farm_.measure(request);
  ASSERT_TRUE(retry.status.ok()) << retry.status.error_message();
  EXPECT_EQ(retry.results.size(), 16u);
  for (const auto& r : retry.results) EXPECT_EQ(r.result().error(), v1::OK) << r.result().error_msg();
}

TEST_F(FarmTest, AgentsRejoinARestartedTrackerWhileStillMeasuring) {
  farm_.start_agent("a1");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(10)));
  // A kernel that hangs keeps the agent's measurement busy for its whole 8 s timeout.
  std::thread tuner([&] { farm_.measure(kernel_request("hang", 1, "local-cpu", 8.0)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  farm_.kill_tracker(SIGKILL);
  tuner.join();
  auto restarted = std::chrono::steady_clock::now();
  farm_.start_tracker();
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(5)));
  double back_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - restarted).count();
  std::cout << "agent back " << back_s << " s after the restart, its hung candidate still running\n";
  EXPECT_LT(back_s, 5.0);
}

TEST_F(FarmTest, SigtermDrainsLeasedWorkThenStops) {
  farm_.start_agent("a1");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(10)));
  v1::MeasureRequest request = kernel_request("matmul", 6);
  request.mutable_options()->set_number(0);
  request.mutable_options()->set_min_repeat_ms(30);
  bool signalled = false;
  MeasureOutcome out = farm_.measure(request, [&](const v1::MeasureResponse&, int count) {
    if (count == 1 && !signalled) {
      signalled = true;
      farm_.tracker().signal(SIGTERM);
    }
  });
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_EQ(out.results.size(), 6u);
  for (const auto& r : out.results) EXPECT_EQ(r.result().error(), v1::OK) << r.result().error_msg();
  int status = farm_.tracker().wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace tunefarm::testing
