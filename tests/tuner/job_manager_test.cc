#include "tuner/job_manager.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <mutex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "pg_server.h"
#include "tests/search/fakes.h"
#include "tuner/build_guard.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

double peak(const Point& p) {
  return 1.0 + 100.0 * std::exp(-(std::pow(p[0] - 5, 2) + std::pow(p[1] - 2, 2) + std::pow(p[2] - 3, 2)) / 4.0);
}

class FakeTasks : public TaskFactory {
 public:
  StatusOr<std::unique_ptr<TuningTask>> make_task(const Workload& w, const Target& target,
                                                  const std::string& name) override {
    if (!name.empty() && name != "fake") return invalid_argument(fmt::format("no template '{}'", name));
    {
      std::lock_guard<std::mutex> lock(mu_);
      targets_.push_back(target.to_string());
    }
    return std::unique_ptr<TuningTask>(std::make_unique<FakeTask>(std::vector<int64_t>{8, 8, 8}, peak, w.to_string()));
  }

  // The targets tasks were made for, in order.
  std::vector<std::string> targets() {
    std::lock_guard<std::mutex> lock(mu_);
    return targets_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> targets_;
};

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("jobs-" + std::to_string(::getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    auto store = db::RecordStore::open((dir_ / "history.db").string());
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  BackendFactory backends(std::function<void(FakeBackend&)> setup = {}) {
    return [this, setup](const v1::Job& job) -> StatusOr<std::unique_ptr<MeasureBackend>> {
      auto task = std::make_unique<FakeTask>(std::vector<int64_t>{8, 8, 8}, peak,
                                             from_proto(job.spec().tasks(0).workload())->to_string());
      auto backend = std::make_unique<FakeBackend>(*task, false);
      if (setup) setup(*backend);
      std::lock_guard<std::mutex> lock(mu_);
      owned_tasks_.push_back(std::move(task));
      return std::unique_ptr<MeasureBackend>(std::move(backend));
    };
  }

  static v1::JobSpec spec(int trials, const std::string& workload = "matmul:M=8,N=8,K=8") {
    v1::JobSpec s;
    *s.add_tasks()->mutable_workload() = to_proto(*parse_workload(workload));
    *s.mutable_target() = to_proto(*parse_target("llvm"));
    s.set_device_key("local-cpu");
    s.set_trials(trials);
    s.set_batch_size(16);
    return s;
  }

  // One CPU-only agent of this machine's architecture serves local-cpu.
  static StatusOr<std::vector<AgentPlatform>> known_keys(const std::string& key) {
    if (key == "local-cpu") return std::vector<AgentPlatform>{{.arch = host_arch()}};
    return invalid_argument(fmt::format("unknown device key '{}' (the tracker knows: local-cpu)", key));
  }

  v1::Job wait_until_ended(JobManager& m, const std::string& id) {
    uint64_t version = 0;
    for (int i = 0; i < 600; ++i) {
      auto u = m.wait_for_update(id, version, std::chrono::milliseconds(100));
      EXPECT_TRUE(u.ok());
      if (!u.ok()) break;
      version = u->version;
      if (u->ended) return u->job;
    }
    ADD_FAILURE() << "job " << id << " did not end";
    return {};
  }

  std::set<std::string> distinct_configs(const std::string& job_id) {
    auto n = store_->count_measured_configs(job_id);
    EXPECT_TRUE(n.ok());
    db::RecordFilter f;
    f.job_id = job_id;
    auto page = store_->list_records(f, 100000);
    std::set<std::string> out;
    for (const auto& r : page->records) out.insert(from_proto(r.config()).to_json());
    EXPECT_EQ(static_cast<int64_t>(out.size()), *n);
    return out;
  }

  // Submits `job` to a JobManager that shuts down (as tunerd does when stopped) once `results`
  // results have arrived, mid-batch; returns the job's id, or "" on failure.
  std::string run_until_shutdown(const v1::JobSpec& job, int64_t results) {
    std::string id;
    {
      // The backend's thread cannot stop the manager it runs in: a thread of its own does, joined
      // before the manager is destroyed (a detached one could still be in shutdown() then).
      std::mutex mu;
      std::thread stopper;
      bool stopped = false;
      JobManager first(*store_, tasks_, backends([&](FakeBackend& b) {
                         b.after_result = [&](int64_t n) {
                           std::lock_guard<std::mutex> lock(mu);
                           if (n == results && !stopped) stopper = std::thread([&first] { first.shutdown(); });
                         };
                       }),
                       known_keys);
      auto submitted = first.submit(job);
      EXPECT_TRUE(submitted.ok()) << submitted.status().to_string();
      if (submitted.ok()) {
        id = submitted->id();
        for (int i = 0; i < 200; ++i) {
          auto j = store_->get_job(id);
          if (j->state() == v1::RUNNING && store_->count_measured_configs(id).value() >= results) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
      first.shutdown();
      std::lock_guard<std::mutex> lock(mu);
      stopped = true;
      if (stopper.joinable()) stopper.join();
    }
    if (id.empty()) return "";
    EXPECT_TRUE(store_->flush().ok());
    return id;
  }

  std::filesystem::path dir_;
  std::unique_ptr<db::RecordStore> store_;
  FakeTasks tasks_;
  std::mutex mu_;
  std::vector<std::unique_ptr<FakeTask>> owned_tasks_;
};

TEST_F(JobManagerTest, AJobRunsToItsBudgetAndRecordsEveryResult) {
  JobManager m(*store_, tasks_, backends(), known_keys);
  ASSERT_TRUE(m.start().ok());
  auto job = m.submit(spec(64));
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->state(), v1::QUEUED);
  v1::Job done = wait_until_ended(m, job->id());
  EXPECT_EQ(done.state(), v1::SUCCEEDED) << done.error();
  EXPECT_EQ(done.progress().trials_done(), 64);
  ASSERT_EQ(done.progress().tasks_size(), 1);
  EXPECT_GT(done.progress().tasks(0).best_gflops(), 0);
  EXPECT_EQ(distinct_configs(job->id()).size(), 64u);

  // The history's best is the fastest successful record of the job.
  auto best = store_->query_best(*parse_workload("matmul:M=8,N=8,K=8"), *parse_target("llvm"), "local-cpu", 1);
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  db::RecordFilter f;
  f.job_id = job->id();
  double fastest = 0;
  // The page held in a variable: a range-for over a member of the temporary StatusOr would read it
  // after it is destroyed.
  auto page = store_->list_records(f, 1000);
  for (const auto& r : page->records) fastest = std::max(fastest, r.gflops());
  EXPECT_DOUBLE_EQ((*best)[0].gflops(), fastest);
}

// Boards that name their CPU: a key of AVX2-only boards, and a key whose boards differ.
StatusOr<std::vector<AgentPlatform>> lab_keys(const std::string& key) {
  if (key == "haswell-box")
    return std::vector<AgentPlatform>{{.arch = host_arch(), .agent_id = "h1", .cpu_name = "haswell"},
                                      {.arch = host_arch(), .agent_id = "h2", .cpu_name = "haswell", .stream_bytes_per_s = 60e9},
                                      {.arch = host_arch(), .agent_id = "h3", .cpu_name = "haswell", .stream_bytes_per_s = 40e9},
                                      {.arch = host_arch(), .agent_id = "liar", .cpu_name = "haswell", .stream_bytes_per_s = 1e-300},
                                      {.arch = host_arch(), .agent_id = "nan", .cpu_name = "haswell",
                                       .stream_bytes_per_s = std::numeric_limits<double>::quiet_NaN()}};
  if (key == "mixed")
    return std::vector<AgentPlatform>{{.arch = host_arch(), .agent_id = "old", .cpu_name = "haswell"},
                                      {.arch = host_arch(),
                                       .agent_id = "new",
                                       .cpu_name = "znver4",
                                       .cpu_features = "+avx512f"},
                                      {.arch = host_arch(), .agent_id = "old2", .cpu_name = "haswell"}};
  return invalid_argument(fmt::format("unknown device key '{}'", key));
}

v1::JobSpec on_key(v1::JobSpec spec, const std::string& key) {
  spec.set_device_key(key);
  return spec;
}

TEST_F(JobManagerTest, ALlvmJobIsBuiltForItsKeysCpuAndItsRecordsSaySo) {
  JobManager m(*store_, tasks_, backends(), lab_keys);
  ASSERT_TRUE(m.start().ok());
  auto job = m.submit(on_key(spec(16), "haswell-box"));
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(from_proto(job->spec().build_target())->to_string(), "llvm -mcpu=haswell");
  // The model estimate prices the other steps at the slowest board's stream figure (one too old to
  // say has none, and a figure no cache has is left out); a client cannot set it.
  EXPECT_EQ(job->spec().stream_bytes_per_s(), 40e9);
  v1::JobSpec claimed = on_key(spec(16), "haswell-box");
  claimed.set_stream_bytes_per_s(1e15);
  auto other = m.submit(claimed);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  EXPECT_EQ(other->spec().stream_bytes_per_s(), 40e9);
  EXPECT_EQ(wait_until_ended(m, job->id()).state(), v1::SUCCEEDED);
  wait_until_ended(m, other->id());
  // Every task, at submit and when the job ran, was made for the boards' CPU, never this host's.
  auto targets = tasks_.targets();
  ASSERT_FALSE(targets.empty());
  for (const auto& t : targets) EXPECT_EQ(t, "llvm -mcpu=haswell");
  db::RecordFilter f;
  f.job_id = job->id();
  auto records = store_->list_records(f, 1000);
  ASSERT_TRUE(records.ok());
  ASSERT_GE(records->records.size(), 16u);
  for (const auto& r : records->records) {
    // Queries by the target the user named still find them.
    EXPECT_EQ(from_proto(r.target())->to_string(), "llvm");
    EXPECT_EQ(from_proto(r.built_for())->to_string(), "llvm -mcpu=haswell");
  }
}

TEST_F(JobManagerTest, AJobOnAKeyWhoseAgentsDifferInCpuIsRefusedNamingThem) {
  JobManager m(*store_, tasks_, backends(), lab_keys);
  ASSERT_TRUE(m.start().ok());
  v1::JobSpec s = on_key(spec(16), "mixed");
  auto job = m.submit(s);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(job.status().message(), HasSubstr("device key 'mixed' differ in CPU"));
  EXPECT_THAT(job.status().message(), HasSubstr("old, old2 (haswell); new (znver4 +avx512f)"));
  EXPECT_TRUE(m.list({}, 10)->empty()) << "a refused job was stored";
  // A target that names its CPU is refused all the same: the boards would measure different code.
  *s.mutable_target() = to_proto(*parse_target("llvm -mcpu=haswell"));
  EXPECT_FALSE(m.submit(s).ok());
}

TEST_F(JobManagerTest, InvalidSpecsAreRefusedWithTheFieldAtFault) {
  JobManager m(*store_, tasks_, backends(), known_keys);
  struct Case {
    std::function<void(v1::JobSpec&)> edit;
    const char* expected;
  };
  const Case cases[] = {
      {[](v1::JobSpec& s) { s.clear_tasks(); }, "no tasks"},
      {[](v1::JobSpec& s) { s.mutable_tasks(0)->mutable_workload()->set_op("gemm"); }, "unknown operator 'gemm'"},
      {[](v1::JobSpec& s) { s.mutable_tasks(0)->mutable_workload()->mutable_params(0)->set_value(0); }, "M=0 is out of range"},
      {[](v1::JobSpec& s) { s.mutable_target()->set_kind("opencl"); }, "unknown target kind"},
      {[](v1::JobSpec& s) { s.set_trials(0); }, "trials 0 must be between"},
      {[](v1::JobSpec& s) { s.set_trials(-5); }, "trials -5"},
      {[](v1::JobSpec& s) { s.set_time_budget_s(-1); }, "time budget -1"},
      {[](v1::JobSpec& s) { s.set_batch_size(5000); }, "batch size 5000"},
      {[](v1::JobSpec& s) { s.set_early_stopping(-1); }, "early stopping -1"},
      {[](v1::JobSpec& s) { s.set_device_key(""); }, "device key is empty"},
      {[](v1::JobSpec& s) { s.set_device_key("bad key!"); }, "device key 'bad key!'"},
      {[](v1::JobSpec& s) { s.set_device_key("rk3399"); }, "unknown device key 'rk3399'"},
      {[](v1::JobSpec& s) { *s.mutable_target() = to_proto(*parse_target("cuda -arch=sm_90")); },
       "device key 'local-cpu' cannot run target 'cuda -arch=sm_90'"},
      {[](v1::JobSpec& s) { s.mutable_tasks(0)->set_template_name("nope"); }, "no template 'nope'"},
      {[](v1::JobSpec& s) { s.mutable_measure()->set_repeat(-1); }, "measure.repeat -1"},
      {[](v1::JobSpec& s) { s.mutable_measure()->set_timeout_s(1e9); }, "measure.timeout_s"},
  };
  for (const auto& c : cases) {
    v1::JobSpec s = spec(10);
    c.edit(s);
    auto job = m.submit(s);
    ASSERT_FALSE(job.ok()) << c.expected;
    EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(job.status().message(), HasSubstr(c.expected));
  }
  auto none = m.list({}, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty()) << "a refused job was stored";
}

TEST_F(JobManagerTest, CancelEndsARunningJobAndRefusesAnEndedOne) {
  std::atomic<bool> slow{true};
  JobManager m(*store_, tasks_, backends([&](FakeBackend& b) {
                 b.after_result = [&](int64_t) {
                   if (slow.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
                 };
               }),
               known_keys);
  auto job = m.submit(spec(5000));
  ASSERT_TRUE(job.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(m.cancel(job->id()).ok());
  v1::Job done = wait_until_ended(m, job->id());
  EXPECT_EQ(done.state(), v1::CANCELLED);
  EXPECT_LT(done.progress().trials_done(), 5000);
  EXPECT_EQ(m.cancel(job->id()).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.cancel("no-such-job").status().code(), StatusCode::kNotFound);
}

TEST_F(JobManagerTest, AJobStoppedMidwayResumesAndEndsWithExactlyItsBudget) {
  // The service goes down after 40 results, in the middle of a batch.
  std::string id = run_until_shutdown(spec(100), 40);
  ASSERT_FALSE(id.empty());
  auto midway = store_->get_job(id);
  ASSERT_TRUE(midway.ok());
  EXPECT_EQ(midway->state(), v1::RUNNING);
  size_t before = distinct_configs(id).size();
  EXPECT_GE(before, 40u);
  EXPECT_LT(before, 100u);

  JobManager second(*store_, tasks_, backends(), known_keys);
  ASSERT_TRUE(second.start().ok());
  v1::Job done = wait_until_ended(second, id);
  EXPECT_EQ(done.state(), v1::SUCCEEDED) << done.error();
  EXPECT_EQ(distinct_configs(id).size(), 100u);
  EXPECT_EQ(done.progress().trials_done(), 100);
}

// A job's time budget covers all its runs: after a restart it gets what is left, not a fresh one.
TEST_F(JobManagerTest, AResumedJobKeepsTheTimeItHadAlreadySpent) {
  v1::JobSpec s = spec(500);
  s.set_time_budget_s(600);
  std::string id = run_until_shutdown(s, 20);
  ASSERT_FALSE(id.empty());
  size_t before = distinct_configs(id).size();
  ASSERT_LT(before, 500u);
  // As if the first run had gone on for the whole budget before tunerd stopped.
  v1::JobProgress spent = store_->get_job(id)->progress();
  spent.set_elapsed_s(600);
  ASSERT_TRUE(store_->update_job_progress(id, spent).ok());

  JobManager second(*store_, tasks_, backends(), known_keys);
  ASSERT_TRUE(second.start().ok());
  v1::Job done = wait_until_ended(second, id);
  EXPECT_EQ(done.state(), v1::SUCCEEDED) << done.error();
  EXPECT_EQ(distinct_configs(id).size(), before);  // Nothing new measured: the budget was spent.
  EXPECT_GE(done.progress().elapsed_s(), 600.0);
}

TEST_F(JobManagerTest, SeveralJobsRunAtOnceAndAllFinish) {
  JobManagerOptions options;
  options.max_running_jobs = 2;
  JobManager m(*store_, tasks_, backends(), known_keys, options);
  std::vector<std::string> ids;
  for (const char* w : {"matmul:M=8,N=8,K=8", "matmul:M=16,N=16,K=16", "dense:M=4,N=8,K=8"}) {
    auto job = m.submit(spec(48, w));
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    ids.push_back(job->id());
  }
  for (const auto& id : ids) {
    v1::Job done = wait_until_ended(m, id);
    EXPECT_EQ(done.state(), v1::SUCCEEDED);
    EXPECT_EQ(distinct_configs(id).size(), 48u);
  }
  auto all = m.list({v1::SUCCEEDED}, 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u);
}

TEST(TuningOptionsFromASpec, TheDefaultBatchIsSizedToTheFarm) {
  EXPECT_EQ(farm_batch_size(0, 64), 8);
  EXPECT_EQ(farm_batch_size(1, 64), 8);
  EXPECT_EQ(farm_batch_size(3, 64), 12);
  EXPECT_EQ(farm_batch_size(100, 64), 64);
  EXPECT_EQ(farm_batch_size(1, 4), 4);
}

// A model's job of many tasks measures in rounds small enough that every task gets one.
TEST(TuningOptionsFromASpec, ManyTasksMakeSmallerRounds) {
  v1::Job job;
  job.set_id("job-1");
  v1::JobSpec& spec = *job.mutable_spec();
  spec.set_trials(40);
  for (int i = 0; i < 17; ++i) spec.add_tasks();
  JobManagerOptions defaults;
  EXPECT_EQ(tuning_options(job, defaults, 1).batch_size, 2);
  spec.set_trials(1000);
  EXPECT_EQ(tuning_options(job, defaults, 1).batch_size, 8) << "the farm's size when the budget allows";
  spec.set_trials(10);
  EXPECT_EQ(tuning_options(job, defaults, 1).batch_size, 1);
  spec.set_batch_size(16);
  EXPECT_EQ(tuning_options(job, defaults, 1).batch_size, 16) << "a batch size the job sets wins";
}

TEST(TuningOptionsFromASpec, TheSpecWinsAndTheServiceFillsTheRest) {
  v1::Job job;
  job.set_id("job-1");
  v1::JobSpec& spec = *job.mutable_spec();
  spec.set_trials(48);
  spec.set_time_budget_s(2);
  spec.set_early_stopping(8);
  spec.set_strategy(v1::RANDOM);
  spec.mutable_measure()->set_repeat(7);
  job.mutable_progress()->set_elapsed_s(3.5);
  JobManagerOptions defaults;
  defaults.build_threads = 2;
  TuningOptions o = tuning_options(job, defaults, 2);
  EXPECT_EQ(o.trials, 48);
  EXPECT_EQ(o.batch_size, 8);
  EXPECT_EQ(o.time_budget_s, 2);
  EXPECT_EQ(o.elapsed_before_s, 3.5);
  EXPECT_EQ(o.early_stopping, 8);
  EXPECT_EQ(o.strategy, Strategy::kRandom);
  EXPECT_EQ(o.build_threads, 2);
  EXPECT_EQ(o.measure.repeat(), 7);
  EXPECT_EQ(o.measure.timeout_s(), defaults.default_measure.timeout_s());
  EXPECT_EQ(o.search.seed, tuning_options(job, defaults, 5).search.seed) << "the seed depends on the job only";
  spec.set_batch_size(24);
  EXPECT_EQ(tuning_options(job, defaults, 2).batch_size, 24);
  EXPECT_EQ(o.measure.min_repeat_ms(), kDefaultTuningMinRepeatMs);
  *spec.mutable_target() = to_proto(*parse_target("cuda -arch=sm_90"));
  EXPECT_EQ(tuning_options(job, defaults, 2).measure.min_repeat_ms(), kDefaultGpuTuningMinRepeatMs)
      << "a GPU job's repeats are shorter where its spec sets none";
  spec.mutable_measure()->set_min_repeat_ms(30);
  EXPECT_EQ(tuning_options(job, defaults, 2).measure.min_repeat_ms(), 30) << "the spec's own figure wins";
}

// A model job's candidates rotate their constants through what one run of the model touches:
// the task table's figure where the client sent one, else its tasks' arguments at every
// occurrence and the other steps' bytes; a job of workloads rotates by the worker's default.
TEST(TuningOptionsFromASpec, ModelJobsRotateThroughWhatARunTouches) {
  v1::Job job;
  job.set_id("job-1");
  v1::JobSpec& spec = *job.mutable_spec();
  spec.set_trials(8);
  *spec.add_tasks()->mutable_workload() = to_proto(*parse_workload("matmul:M=16,N=16,K=16"));
  JobManagerOptions defaults;
  EXPECT_EQ(tuning_options(job, defaults, 1).measure.rotation_bytes(), 0);
  spec.mutable_tasks(0)->set_weight(3);
  spec.set_other_steps(2);
  spec.set_other_bytes(1000);
  EXPECT_EQ(tuning_options(job, defaults, 1).measure.rotation_bytes(), 1000 + 3 * 3 * 16 * 16 * 4);
  spec.set_run_bytes(5e6);
  EXPECT_EQ(tuning_options(job, defaults, 1).measure.rotation_bytes(), 5000000);
  spec.set_run_bytes(std::numeric_limits<double>::infinity());
  EXPECT_EQ(tuning_options(job, defaults, 1).measure.rotation_bytes(), 1000000000000000) << "capped";
  spec.set_run_bytes(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(tuning_options(job, defaults, 1).measure.rotation_bytes(), 1000 + 3 * 3 * 16 * 16 * 4);
  spec.mutable_measure()->set_rotation_bytes(77);
  EXPECT_EQ(tuning_options(job, defaults, 1).measure.rotation_bytes(), 77) << "the spec's own figure wins";
}

// At default settings (no batch size), a job of three tasks and 48 trials used to give all 48 to the
// first task: batches sized to the farm let the scheduler give every task trials.
TEST_F(JobManagerTest, AMultiTaskJobAtDefaultSettingsGivesEveryTaskTrials) {
  JobManager m(*store_, tasks_, backends(), known_keys);
  ASSERT_TRUE(m.start().ok());
  v1::JobSpec s = spec(48);
  s.set_batch_size(0);
  for (const char* w : {"matmul:M=16,N=8,K=8", "matmul:M=32,N=8,K=8"})
    *s.add_tasks()->mutable_workload() = to_proto(*parse_workload(w));
  auto job = m.submit(s);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  v1::Job done = wait_until_ended(m, job->id());
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error();
  ASSERT_EQ(done.progress().tasks_size(), 3);
  for (const auto& t : done.progress().tasks()) EXPECT_GT(t.trials_done(), 0) << t.workload().ShortDebugString();
  EXPECT_EQ(done.progress().trials_done(), 48);
  db::RecordFilter f;
  f.job_id = job->id();
  auto page = store_->list_records(f, 1000);
  ASSERT_TRUE(page.ok());
  std::set<std::string> measured;
  int trials = 0;
  for (const auto& r : page->records) {
    measured.insert(r.workload().ShortDebugString() + from_proto(r.config()).to_json());
    trials += r.remeasure_round() == 0;
  }
  EXPECT_EQ(measured.size(), 48u);
  EXPECT_EQ(trials, 48);
}

// The figures a job shows (per task and for the job) are those `best` answers from the history:
// one rule for a config's figure (common/figure.h), re-measurements recorded. Lucky first timings
// make a trial's figure and the re-measured one differ.
TEST_F(JobManagerTest, AJobsBestFiguresAreTheHistorysBest) {
  JobManager m(*store_, tasks_, backends([](FakeBackend& b) {
                 for (int64_t i = 0; i < 512; i += 2) b.lucky_.insert(i);
               }),
               known_keys);
  ASSERT_TRUE(m.start().ok());
  v1::JobSpec s = spec(48);
  *s.add_tasks()->mutable_workload() = to_proto(*parse_workload("matmul:M=16,N=8,K=8"));
  auto job = m.submit(s);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  v1::Job done = wait_until_ended(m, job->id());
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error();
  double job_best = 0;
  for (const auto& t : done.progress().tasks()) {
    auto best = store_->query_best(*from_proto(t.workload()), *from_proto(s.target()), s.device_key());
    ASSERT_TRUE(best.ok() && best->size() == 1u);
    EXPECT_DOUBLE_EQ(t.best_gflops(), best->front().gflops()) << t.workload().ShortDebugString();
    // The job's winner has that figure in the history too (the fake landscape has ties, so another
    // config may share it).
    auto all = store_->query_best(*from_proto(t.workload()), *from_proto(s.target()), s.device_key(), 1000);
    ASSERT_TRUE(all.ok());
    auto winner = std::find_if(all->begin(), all->end(), [&](const v1::Record& r) {
      return from_proto(r.config()).to_json() == from_proto(t.best_config()).to_json();
    });
    ASSERT_NE(winner, all->end());
    EXPECT_DOUBLE_EQ(winner->gflops(), t.best_gflops());
    job_best = std::max(job_best, t.best_gflops());
  }
  EXPECT_DOUBLE_EQ(done.progress().best_gflops(), job_best);
}

TEST_F(JobManagerTest, AJobWhoseEveryCandidateFailsEndsFailedNamingTheDominantError) {
  JobManager m(*store_, tasks_, backends([](FakeBackend& b) { b.fail_all = v1::RUNTIME_ERROR; }), known_keys);
  ASSERT_TRUE(m.start().ok());
  auto job = m.submit(spec(16));
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  v1::Job done = wait_until_ended(m, job->id());
  EXPECT_EQ(done.state(), v1::FAILED);
  EXPECT_THAT(done.error(), HasSubstr("every candidate failed; most often RUNTIME_ERROR"));
  EXPECT_THAT(done.error(), HasSubstr("the worker aborted"));
}

// Candidates that no agent ran (DEVICE_LOST) cost no trials, leave no record, and are measured
// later: the job still ends with its budget in distinct measured configs.
TEST_F(JobManagerTest, DeviceLostCandidatesCostNoTrials) {
  JobManager m(*store_, tasks_, backends([](FakeBackend& b) { b.lose_first = 20; }), known_keys);
  ASSERT_TRUE(m.start().ok());
  auto job = m.submit(spec(32));
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  v1::Job done = wait_until_ended(m, job->id());
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error();
  EXPECT_EQ(done.progress().trials_done(), 32);
  EXPECT_EQ(distinct_configs(job->id()).size(), 32u);
  db::RecordFilter f;
  f.job_id = job->id();
  auto page = store_->list_records(f, 1000);
  ASSERT_TRUE(page.ok());
  for (const auto& r : page->records) EXPECT_NE(r.result().error(), v1::DEVICE_LOST);
}

// A cancel withdraws the batch in flight instead of measuring it to the end.
TEST_F(JobManagerTest, CancelStopsARunningJobWithinTheBatch) {
  JobManager m(*store_, tasks_, backends([](FakeBackend& b) { b.delay = std::chrono::milliseconds(50); }),
               known_keys);
  ASSERT_TRUE(m.start().ok());
  v1::JobSpec s = spec(64);
  s.set_batch_size(64);
  auto job = m.submit(s);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  for (int i = 0; i < 200 && store_->count_measured_configs(job->id()).value() < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto asked = std::chrono::steady_clock::now();
  ASSERT_TRUE(m.cancel(job->id()).ok());
  v1::Job done = wait_until_ended(m, job->id());
  EXPECT_EQ(done.state(), v1::CANCELLED);
  EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(2));
  EXPECT_LT(store_->count_measured_configs(job->id()).value(), 40);
}

// A job during whose builds tunerd died twice in a row (an LLVM abort on its target, say) is FAILED
// at the next start instead of resumed into the same crash; after one death it is resumed.
TEST_F(JobManagerTest, AJobThatKeptCrashingTunerdWhileCompilingIsFailedAtTheNextStart) {
  auto twice = store_->create_job(spec(8));
  auto once = store_->create_job(spec(8));
  ASSERT_TRUE(twice.ok() && once.ok());
  std::ofstream(dir_ / (twice->id() + ".building")) << "2\n";
  std::ofstream(dir_ / (once->id() + ".building")) << "1\n";
  JobManagerOptions options;
  options.build_mark_dir = dir_.string();
  JobManager m(*store_, tasks_, backends(), known_keys, options);
  ASSERT_TRUE(m.start().ok());
  v1::Job failed = wait_until_ended(m, twice->id());
  EXPECT_EQ(failed.state(), v1::FAILED);
  EXPECT_THAT(failed.error(), HasSubstr("died 2 times in a row while compiling this job's candidates"));
  EXPECT_EQ(store_->count_measured_configs(twice->id()).value(), 0);
  EXPECT_EQ(wait_until_ended(m, once->id()).state(), v1::SUCCEEDED);
  EXPECT_FALSE(std::filesystem::exists(dir_ / (twice->id() + ".building")));
  EXPECT_FALSE(std::filesystem::exists(dir_ / (once->id() + ".building")));
}

// While a candidate builds, its job's mark is on disk; when the builds are done it is gone.
TEST(BuildGuard, MarksAJobOnlyWhileItsCandidatesBuild) {
  auto dir = std::filesystem::path(::testing::TempDir()) / ("guard-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto inner = std::make_unique<FakeTask>(std::vector<int64_t>{8, 8, 8}, peak);
  bool marked_during_build = false;
  auto marks = file_build_marks(dir.string());
  inner->on_build = [&] { marked_during_build = marks->crashes("job-1") == 1; };
  BuildGuard guard(*marks, "job-1");
  auto task = guard_builds(std::move(inner), guard);
  ASSERT_TRUE(task->build(Point{1, 1, 1}).ok());
  EXPECT_TRUE(marked_during_build);
  EXPECT_EQ(marks->crashes("job-1"), 0);
  std::filesystem::remove_all(dir);
}

// A backend whose batch breaks after some results: the job ends FAILED with the backend's reason
// (not left RUNNING), and every result that came back before the break is in the history.
TEST_F(JobManagerTest, ABatchDroppedMidwayFailsTheJobAndKeepsWhatWasMeasured) {
  std::atomic<int64_t> delivered{0};
  JobManager m(*store_, tasks_, backends([&](FakeBackend& b) {
                 b.drop_after = 5;
                 b.after_result = [&](int64_t) { ++delivered; };
               }),
               known_keys);
  ASSERT_TRUE(m.start().ok());
  auto job = m.submit(spec(64));
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  v1::Job done = wait_until_ended(m, job->id());
  EXPECT_EQ(done.state(), v1::FAILED);
  EXPECT_THAT(done.error(), HasSubstr("the stream to the tracker broke mid-batch"));
  db::RecordFilter filter;
  filter.job_id = job->id();
  auto recorded = store_->list_records(filter);
  ASSERT_TRUE(recorded.ok()) << recorded.status().to_string();
  EXPECT_GT(delivered.load(), 0);
  // Every result the backend answered is kept (builds that failed are recorded besides).
  int64_t measured = 0;
  for (const auto& r : recorded->records)
    if (r.result().error() != v1::INVALID_CONFIG && r.result().error() != v1::COMPILE_ERROR) ++measured;
  EXPECT_EQ(measured, delivered.load());
  auto stored = store_->get_job(job->id());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state(), v1::FAILED);
}

// A backend that fails every call (the tracker is gone): the job ends FAILED saying why, with
// nothing recorded, and is not left RUNNING.
TEST_F(JobManagerTest, ADeadBackendFailsTheJobSayingWhy) {
  JobManager m(*store_, tasks_, backends([](FakeBackend& b) { b.dead = true; }), known_keys);
  ASSERT_TRUE(m.start().ok());
  auto job = m.submit(spec(32));
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  v1::Job done = wait_until_ended(m, job->id());
  EXPECT_EQ(done.state(), v1::FAILED);
  EXPECT_THAT(done.error(), HasSubstr("cannot reach the tracker at 127.0.0.1:9190"));
  auto stored = store_->get_job(job->id());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state(), v1::FAILED);
  auto running = m.list({v1::RUNNING}, 0);
  ASSERT_TRUE(running.ok());
  EXPECT_TRUE(running->empty());
}

// A flood of submits is refused past the queue's limit with a reason, instead of queuing years of work.
TEST_F(JobManagerTest, SubmitsPastTheQueueLimitAreRefused) {
  JobManagerOptions options;
  options.max_running_jobs = 1;
  options.max_queued_jobs = 3;
  JobManager m(*store_, tasks_, backends([](FakeBackend& b) { b.delay = std::chrono::milliseconds(20); }), known_keys,
               options);
  ASSERT_TRUE(m.start().ok());
  int accepted = 0;
  Status refused;
  for (int i = 0; i < 10 && refused.ok(); ++i) {
    auto job = m.submit(spec(64));
    if (job.ok()) ++accepted;
    else refused = job.status();
  }
  EXPECT_LE(accepted, 4);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("jobs are already waiting to run"));
  EXPECT_THAT(refused.message(), HasSubstr("--max-queued-jobs"));
  m.shutdown();
}

// One client cannot fill the queue: past its own share it is refused, naming the limit and how many
// jobs it has waiting, while another client still gets in.
TEST_F(JobManagerTest, OneClientCannotFillTheQueue) {
  JobManagerOptions options;
  options.max_running_jobs = 1;
  options.max_queued_jobs = 10;
  options.max_queued_jobs_per_client = 2;
  JobManager m(*store_, tasks_, backends([](FakeBackend& b) { b.delay = std::chrono::milliseconds(50); }), known_keys,
               options);
  ASSERT_TRUE(m.start().ok());
  // The first job may start at once; two more wait.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(m.submit(spec(1000), "client token 1").ok()) << i;
  auto refused = m.submit(spec(1000), "client token 1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("client token 1 already has 2 jobs waiting"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--max-queued-jobs-per-client"));
  EXPECT_TRUE(m.submit(spec(1000), "client token 2").ok());
  // A submit without a client name is held only by the service-wide limit.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(m.submit(spec(1000)).ok()) << i;
  m.shutdown();
}

}  // namespace
}  // namespace tunefarm

namespace tunefarm {
namespace {

// Tunerds sharing a history in PostgreSQL (tests/db/pg_server.h), as JobManagers over stores of
// one database: the queue they serve is the history's.
class SharedJobManagerTest : public JobManagerTest {
 protected:
  void SetUp() override {
    JobManagerTest::SetUp();
    if (auto why = testing::PgServer::unavailable()) GTEST_SKIP() << *why;
    url_ = testing::PgServer::shared().new_database();
    store_ = db::RecordStore::open(url_).value();
    other_ = db::RecordStore::open(url_).value();
  }
  void TearDown() override {
    other_.reset();
    JobManagerTest::TearDown();
  }
  // A manager whose jobs measure slowly (a result every 50 ms), run as `owner` under short leases.
  JobManagerOptions shared_options(const std::string& owner) {
    JobManagerOptions options;
    options.max_running_jobs = 1;
    options.lease_owner = owner;
    options.lease = std::chrono::milliseconds(400);
    return options;
  }
  BackendFactory slow() {
    return backends([](FakeBackend& b) { b.delay = std::chrono::milliseconds(50); });
  }

  std::string url_;
  std::unique_ptr<db::RecordStore> other_;  // Another tunerd's store.
};

// --max-queued-jobs and the per-client share count every job waiting in the history, not only the
// ones this tunerd took: jobs submitted through another tunerd fill the same queue.
TEST_F(SharedJobManagerTest, TheQueueLimitsCountTheHistorysQueue) {
  JobManagerOptions options = shared_options("a");
  options.max_queued_jobs = 2;
  options.max_queued_jobs_per_client = 1;
  // Not started: no heartbeat takes the other tunerd's jobs off the queue.
  JobManager m(*store_, tasks_, slow(), known_keys, options);
  std::string first = other_->create_job(spec(64), {"", ""})->job.id();
  ASSERT_TRUE(other_->create_job(spec(64), {"sha256:x", ""}).ok());
  auto refused = m.submit(spec(64));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("2 jobs are already waiting to run (at most 2"));
  ASSERT_EQ(other_->request_cancel(first)->state(), v1::CANCELLED);
  auto theirs = m.submit(spec(64), "client token 1", {"sha256:x", ""});
  ASSERT_FALSE(theirs.ok());
  EXPECT_THAT(theirs.status().message(), HasSubstr("client token 1 already has 1 jobs waiting"));
  EXPECT_TRUE(m.submit(spec(64), "client token 2", {"sha256:y", ""}).ok());
}

// A resume queues a job as a submit does: the resumer's share of the history's queue holds it too.
TEST_F(SharedJobManagerTest, AResumeIsHeldByTheResumersShareOfTheQueue) {
  JobManagerOptions options = shared_options("a");
  options.max_queued_jobs = 10;
  options.max_queued_jobs_per_client = 1;
  JobManager m(*store_, tasks_, slow(), known_keys, options);
  std::string stopped = other_->create_job(spec(64), {"sha256:x", "first"})->job.id();
  ASSERT_EQ(other_->request_cancel(stopped)->state(), v1::CANCELLED);
  ASSERT_TRUE(other_->create_job(spec(64), {"sha256:x", "second"}).ok());
  auto refused = m.resume(stopped, "client token 1", "sha256:x");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("client token 1 already has 1 jobs waiting"));
  EXPECT_EQ(store_->get_job(stopped)->state(), v1::CANCELLED);
  EXPECT_TRUE(m.resume(stopped, "client token 2", "sha256:y").ok());
}

// A tunerd takes over only what it can run now: with its one slot busy, a free job stays in the
// history for a tunerd with room, and it takes the job once its slot is free.
TEST_F(SharedJobManagerTest, AJobIsTakenOnlyWhenASlotIsFree) {
  JobManager m(*store_, tasks_, slow(), known_keys, shared_options("a"));
  ASSERT_TRUE(m.start().ok());
  auto busy = m.submit(spec(24));
  ASSERT_TRUE(busy.ok()) << busy.status().to_string();
  std::string waiting = other_->create_job(spec(8))->id();
  // Heartbeats of a tenth of a second go by while the slot is busy.
  for (int i = 0; i < 10 && store_->get_job(busy->id())->state() != v1::SUCCEEDED; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(other_->unleased_jobs(10).value(), std::vector<std::string>{waiting}) << "taken with no free slot";
  }
  EXPECT_EQ(wait_until_ended(m, busy->id()).state(), v1::SUCCEEDED);
  for (int i = 0; i < 100 && store_->get_job(waiting)->state() != v1::SUCCEEDED; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(store_->get_job(waiting)->state(), v1::SUCCEEDED);
}

}  // namespace
}  // namespace tunefarm

namespace tunefarm {
namespace {

// A job taken over in a shared history is guarded as one resumed after a restart, by the marks
// the tunerds before left in the history: when they died compiling the job twice in a row, the
// tunerd that takes it over fails it instead of running it (and dying in turn).
TEST_F(SharedJobManagerTest, AJobThatKeptCrashingTunerdWhileCompilingIsFailedWhenTakenOver) {
  std::string twice = other_->create_job(spec(8))->id();
  // What the other tunerd's guard left when it died in the job's builds, the second in a row.
  ASSERT_TRUE(other_->set_build_crashes(twice, 2).ok());
  JobManagerOptions options = shared_options("a");
  options.build_mark_dir = dir_.string();
  JobManager m(*store_, tasks_, slow(), known_keys, options);
  ASSERT_TRUE(m.start().ok());
  v1::Job failed = wait_until_ended(m, twice);
  EXPECT_EQ(failed.state(), v1::FAILED);
  EXPECT_THAT(failed.error(), HasSubstr("died 2 times in a row while compiling this job's candidates"));
  EXPECT_EQ(store_->count_measured_configs(twice).value(), 0);
  EXPECT_EQ(store_->build_crashes(twice).value(), 0);
}

// A tunerd that died once in a job's builds is not held against the job: the tunerd that takes it
// over runs it, and its own builds clear the mark.
TEST_F(SharedJobManagerTest, AJobWhoseTunerdDiedOnceWhileCompilingRunsWhenTakenOver) {
  std::string once = other_->create_job(spec(8))->id();
  ASSERT_TRUE(other_->set_build_crashes(once, 1).ok());
  JobManagerOptions options = shared_options("a");
  options.build_mark_dir = dir_.string();
  JobManager m(*store_, tasks_, slow(), known_keys, options);
  ASSERT_TRUE(m.start().ok());
  EXPECT_EQ(wait_until_ended(m, once).state(), v1::SUCCEEDED);
  EXPECT_EQ(store_->build_crashes(once).value(), 0);
  EXPECT_FALSE(std::filesystem::exists(dir_ / (once + ".building")));
}

}  // namespace
}  // namespace tunefarm
