#include <gtest/gtest.h>

#include "db/record_store.h"
#include "history_test.h"

namespace tunefarm {
namespace {

using testing::same;

v1::JobSpec spec(int trials = 64) {
  v1::JobSpec spec;
  spec.set_name("gemm 256");
  auto* task = spec.add_tasks();
  *task->mutable_workload() = to_proto(testing::workload("matmul:M=256,N=256,K=256"));
  task->set_weight(1);
  *spec.mutable_target() = to_proto(testing::target("llvm"));
  spec.set_device_key("local-cpu");
  spec.set_trials(trials);
  spec.set_seed(7);
  return spec;
}

class JobStoreTest : public testing::HistoryTest {
 protected:
  void SetUp() override {
    HistoryTest::SetUp();
    if (IsSkipped()) return;
    store_ = db::RecordStore::open(location()).value();
  }
  std::unique_ptr<db::RecordStore> store_;
};

TUNEFARM_ON_BOTH_BACKENDS(JobStoreTest);

TEST_P(JobStoreTest, CreatedJobIsQueuedWithItsSpec) {
  auto job = store_->create_job(spec());
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_FALSE(job->id().empty());
  EXPECT_EQ(job->state(), v1::QUEUED);
  EXPECT_GT(job->created_at_us(), 0);
  EXPECT_EQ(job->started_at_us(), 0);
  EXPECT_TRUE(same(job->spec(), spec()));
  auto again = store_->get_job(job->id());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(same(*again, *job));
  EXPECT_NE(store_->create_job(spec())->id(), job->id());
}

TEST_P(JobStoreTest, StatesMoveForwardAndStampTimes) {
  std::string id = store_->create_job(spec())->id();
  auto running = store_->update_job_state(id, v1::RUNNING);
  ASSERT_TRUE(running.ok()) << running.status().to_string();
  EXPECT_EQ(running->state(), v1::RUNNING);
  EXPECT_GE(running->started_at_us(), running->created_at_us());
  EXPECT_EQ(running->finished_at_us(), 0);
  // A restarted service puts a running job back in the queue; it keeps its first start time.
  ASSERT_TRUE(store_->update_job_state(id, v1::QUEUED).ok());
  auto resumed = store_->update_job_state(id, v1::RUNNING);
  EXPECT_EQ(resumed->started_at_us(), running->started_at_us());
  auto failed = store_->update_job_state(id, v1::FAILED, "tracker unreachable");
  ASSERT_TRUE(failed.ok());
  EXPECT_GE(failed->finished_at_us(), failed->started_at_us());
  EXPECT_EQ(failed->error(), "tracker unreachable");
  auto after_end = store_->update_job_state(id, v1::RUNNING);
  EXPECT_EQ(after_end.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(after_end.status().message().find("FAILED"), std::string::npos) << after_end.status().message();
  EXPECT_EQ(store_->get_job(id)->state(), v1::FAILED);
}

TEST_P(JobStoreTest, UnknownJobsAndStatesAreClearErrors) {
  EXPECT_EQ(store_->get_job("job-nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->update_job_state("job-nope", v1::RUNNING).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->update_job_progress("job-nope", {}).code(), StatusCode::kNotFound);
  std::string id = store_->create_job(spec())->id();
  EXPECT_EQ(store_->update_job_state(id, v1::JOB_STATE_UNSPECIFIED).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(JobStoreTest, ProgressIsKept) {
  std::string id = store_->create_job(spec())->id();
  v1::JobProgress progress;
  progress.set_trials_done(32);
  progress.set_trials_budget(64);
  progress.set_best_gflops(101.5);
  (*progress.mutable_errors_by_code())["RUN_TIMEOUT"] = 2;
  ASSERT_TRUE(store_->update_job_progress(id, progress).ok());
  EXPECT_TRUE(same(store_->get_job(id)->progress(), progress));
}

TEST_P(JobStoreTest, ListsByStateNewestFirst) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(store_->create_job(spec())->id());
  ASSERT_TRUE(store_->update_job_state(ids[1], v1::RUNNING).ok());
  ASSERT_TRUE(store_->update_job_state(ids[3], v1::RUNNING).ok());
  ASSERT_TRUE(store_->update_job_state(ids[4], v1::CANCELLED).ok());
  auto running = store_->list_jobs({v1::RUNNING});
  ASSERT_TRUE(running.ok());
  ASSERT_EQ(running->size(), 2u);
  EXPECT_EQ((*running)[0].id(), ids[3]);
  EXPECT_EQ((*running)[1].id(), ids[1]);
  EXPECT_EQ(store_->list_jobs({v1::QUEUED, v1::CANCELLED})->size(), 3u);
  auto all = store_->list_jobs({}, 2);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id(), ids[4]);
  EXPECT_EQ(store_->list_jobs({}, -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->list_jobs({v1::RUNNING, v1::RUNNING, v1::RUNNING})->size(), 2u);
  EXPECT_EQ(store_->list_jobs({static_cast<v1::JobState>(42)}).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(JobStoreTest, InvalidSpecsAreRefused) {
  v1::JobSpec no_tasks = spec();
  no_tasks.clear_tasks();
  EXPECT_NE(store_->create_job(no_tasks).status().message().find("no tasks"), std::string::npos);
  v1::JobSpec bad_workload = spec();
  bad_workload.mutable_tasks(0)->mutable_workload()->set_op("gemmm");
  auto refused = store_->create_job(bad_workload);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("task 1"), std::string::npos) << refused.status().message();
  EXPECT_EQ(store_->create_job(spec(0)).status().code(), StatusCode::kInvalidArgument);
  v1::JobSpec bad_target = spec();
  bad_target.mutable_target()->set_arch("sm_10");
  bad_target.mutable_target()->set_kind("cuda");
  EXPECT_EQ(store_->create_job(bad_target).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_->list_jobs({})->empty());
}

TEST_P(JobStoreTest, JobsSurviveReopening) {
  std::string id = store_->create_job(spec())->id();
  ASSERT_TRUE(store_->update_job_state(id, v1::RUNNING).ok());
  store_.reset();
  store_ = db::RecordStore::open(location()).value();
  auto running = store_->list_jobs({v1::RUNNING});
  ASSERT_EQ(running->size(), 1u);
  EXPECT_EQ((*running)[0].id(), id);
}

}  // namespace
}  // namespace tunefarm
