#include <gtest/gtest.h>

#include <thread>

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

TEST_P(JobStoreTest, ARequestSentAgainGetsItsJobAndAnotherSpecIsRefusedNamingIt) {
  db::JobRequest request{"sha256:aa", "req-1"};
  auto first = store_->create_job(spec(), request);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_TRUE(first->created);
  // The job has moved on since: a resubmit still answers it, as it is now, and stores nothing.
  ASSERT_TRUE(store_->update_job_state(first->job.id(), v1::RUNNING).ok());
  auto again = store_->create_job(spec(), request);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.id(), first->job.id());
  EXPECT_EQ(again->job.state(), v1::RUNNING);
  // The build target is tunerd's to fill in: a resubmit with another is the same request.
  v1::JobSpec built = spec();
  *built.mutable_build_target() = to_proto(testing::target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"));
  EXPECT_EQ(store_->find_requested_job(request, built)->value().id(), first->job.id());
  EXPECT_EQ(store_->list_jobs({})->size(), 1u);

  auto other_spec = store_->create_job(spec(128), request);
  EXPECT_EQ(other_spec.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(other_spec.status().message().find(first->job.id()), std::string::npos) << other_spec.status().message();
  EXPECT_EQ(store_->find_requested_job(request, spec(128)).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->list_jobs({})->size(), 1u);
}

TEST_P(JobStoreTest, RequestIdsAreEachSubmittersOwn) {
  auto mine = store_->create_job(spec(), {"sha256:aa", "req-1"}).value();
  // Another client's request of the same id is a request of its own: it neither gets nor learns of
  // the first client's job.
  EXPECT_FALSE(store_->find_requested_job({"sha256:bb", "req-1"}, spec())->has_value());
  auto theirs = store_->create_job(spec(128), {"sha256:bb", "req-1"});
  ASSERT_TRUE(theirs.ok()) << theirs.status().to_string();
  EXPECT_TRUE(theirs->created);
  EXPECT_NE(theirs->job.id(), mine.job.id());
  // No request id: a new job every time.
  EXPECT_TRUE(store_->create_job(spec(), {"sha256:aa", ""})->created);
  EXPECT_TRUE(store_->create_job(spec(), {"sha256:aa", ""})->created);
  EXPECT_FALSE(store_->find_requested_job({"sha256:aa", ""}, spec())->has_value());
  EXPECT_EQ(store_->list_jobs({})->size(), 4u);
  EXPECT_EQ(store_->create_job(spec(), {"", "has space"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->create_job(spec(), {"", std::string(129, 'x')}).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(JobStoreTest, SubmitsOfOneRequestAtOnceMakeOneJob) {
  // Two stores over one history: two tunerds (PostgreSQL), or one tunerd's store and a second
  // opened on the file (SQLite); four submits of one request race through each.
  auto other = db::RecordStore::open(location()).value();
  std::vector<std::thread> submits;
  std::vector<StatusOr<db::CreatedJob>> results(8, internal_error("not run"));
  for (size_t i = 0; i < results.size(); ++i)
    submits.emplace_back([&, i] { results[i] = (i % 2 ? *other : *store_).create_job(spec(), {"", "same"}); });
  for (auto& t : submits) t.join();
  int created = 0;
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    created += result->created;
    EXPECT_EQ(result->job.id(), results[0]->job.id());
  }
  EXPECT_EQ(created, 1);
  EXPECT_EQ(store_->list_jobs({})->size(), 1u);
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
