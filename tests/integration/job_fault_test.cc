// Jobs through what a user meets in the first hour, with real processes on 127.0.0.1: a tracker
// killed and restarted at random points of running jobs, a farm that stays away longer than the
// job's limit, a time budget shorter than the first batch, tunerd killed while it re-measures or
// mid-job, and a damaged history salvaged into a new one that tunerd serves.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/wire/wire.h"
#include "db/sqlite.h"
#include "tests/integration/farm_harness.h"
#include "tests/integration/tunerd_harness.h"
#include "tunefarm/v1/tuner.grpc.pb.h"

namespace tunefarm::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class JobFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    farm_.start_agent("cpu-0");
    ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, seconds(20))) << farm_.logs();
  }
  std::string data_dir(const std::string& name) { return farm_.log_dir() + "/" + name; }

  static v1::JobSpec spec(const std::string& workload, int trials, int batch) {
    v1::JobSpec spec;
    *spec.add_tasks()->mutable_workload() = to_proto(*parse_workload(workload));
    *spec.mutable_target() = to_proto(*parse_target("llvm"));
    spec.set_device_key("local-cpu");
    spec.set_trials(trials);
    spec.set_batch_size(batch);
    return spec;
  }
  static v1::Job submit(const Tunerd& tunerd, const v1::JobSpec& spec) {
    auto job = tunerd.submit(spec);
    EXPECT_TRUE(job.ok()) << job.status().to_string();
    return job.ok() ? *job : v1::Job();
  }
  static bool ended(const v1::Job& job) {
    return job.state() == v1::SUCCEEDED || job.state() == v1::FAILED || job.state() == v1::CANCELLED;
  }
  // The distinct configs of a job's trials, and whether any was recorded twice.
  static std::pair<size_t, size_t> trial_configs(const Tunerd& tunerd, const std::string& job_id) {
    std::set<std::string> configs;
    size_t trials = 0;
    for (const v1::Record& r : tunerd.records(job_id)) {
      if (r.remeasure_round() > 0) continue;
      ++trials;
      configs.insert(from_proto(r.config()).to_json());
    }
    return {configs.size(), trials};
  }

  Farm farm_;
};

// Ten kill -9s of trackerd at random points of three running jobs, each followed by a restart at
// once or a little later: every job ends SUCCEEDED with exactly its budget of distinct configs,
// nothing recorded twice, and while the tracker is away `status` says the job waits for it.
TEST_F(JobFaultTest, TrackerKilledTenTimesFailsNoJob) {
  Tunerd tunerd(farm_, data_dir("data"));
  std::vector<v1::Job> jobs;
  for (int n : {48, 56, 64}) {
    v1::JobSpec s = spec(fmt::format("matmul:M={},N={},K={}", n, n, n), 24, 8);
    s.set_strategy(v1::RANDOM);  // No cost model: the jobs stay short on a 2-core CI machine.
    jobs.push_back(submit(tunerd, s));
  }
  std::mt19937 random(20261126);
  auto all_ended = [&] {
    for (const auto& job : jobs)
      if (!ended(tunerd.get(job.id()))) return false;
    return true;
  };
  int kills = 0;
  bool saw_waiting = false;
  while (kills < 10 && !all_ended()) {
    std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution<int>(200, 1500)(random)));
    farm_.kill_tracker(SIGKILL);
    ++kills;
    // Once, stay away long enough for the jobs to notice and say so.
    auto away = milliseconds(kills == 3 ? 3000 : std::uniform_int_distribution<int>(0, 800)(random));
    auto until = std::chrono::steady_clock::now() + away;
    while (std::chrono::steady_clock::now() < until) {
      for (const auto& job : jobs) {
        v1::Job now = tunerd.get(job.id());
        if (now.activity().find("waiting for the tracker") != std::string::npos) saw_waiting = true;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    farm_.start_tracker();
  }
  EXPECT_GE(kills, 10) << "the jobs ended before ten kills: make them longer";
  EXPECT_TRUE(saw_waiting) << "no job said it waited for the tracker while it was away\n" << tunerd.log();
  for (const auto& job : jobs) {
    v1::Job done = tunerd.watch(job.id());
    ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error() << "\n" << tunerd.log();
    auto [distinct, trials] = trial_configs(tunerd, job.id());
    EXPECT_EQ(distinct, 24u) << job.id();
    EXPECT_EQ(trials, 24u) << job.id() << ": a config recorded twice";
    EXPECT_EQ(done.progress().trials_done(), 24);
  }
}

// A tunerd whose tracker is down answers a submit UNAVAILABLE itself: tune-client says so at once,
// in tunerd's words, rather than after seconds of tries as for a tunerd it cannot reach.
TEST_F(JobFaultTest, ASubmitToATunerdWhoseTrackerIsDownFailsAtOnceSayingSo) {
  Tunerd tunerd(farm_, data_dir("data"));
  farm_.kill_tracker(SIGKILL);
  auto start = std::chrono::steady_clock::now();
  auto [rc, out] = tune_client_output(
      farm_, {"--server", tunerd.address(), "submit", "--workload", "matmul:M=16,N=16,K=16", "--trials", "4"},
      "submit");
  double seconds_taken = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("cannot ask the tracker which device keys exist"), std::string::npos) << out;
  EXPECT_EQ(out.find("submit try"), std::string::npos) << out;
  EXPECT_LT(seconds_taken, 4.0) << out;
  farm_.start_tracker();
}

// A farm away for longer than the job's --max-wait fails the job, saying what it waited for and
// how to go on; once the farm is back, `resume` finishes it with exactly its budget.
TEST_F(JobFaultTest, AJobFailsAfterItsMaxWaitAndResumesWhereItStopped) {
  Tunerd tunerd(farm_, data_dir("data"));
  v1::JobSpec s = spec("matmul:M=64,N=64,K=64", 24, 8);
  s.set_strategy(v1::RANDOM);
  s.set_max_wait_s(3);
  v1::Job job = submit(tunerd, s);
  for (int i = 0; i < 600 && tunerd.records(job.id()).size() < 8; ++i) std::this_thread::sleep_for(milliseconds(50));
  farm_.kill_tracker(SIGKILL);
  v1::Job failed = tunerd.watch(job.id());
  ASSERT_EQ(failed.state(), v1::FAILED) << tunerd.log();
  EXPECT_NE(failed.error().find("the tracker"), std::string::npos) << failed.error();
  EXPECT_NE(failed.error().find("--max-wait"), std::string::npos) << failed.error();
  EXPECT_NE(failed.error().find("tune-client resume " + job.id()), std::string::npos) << failed.error();

  farm_.start_tracker();
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, seconds(20))) << farm_.logs();
  auto [rc, out] = tune_client_output(farm_, {"--server", tunerd.address(), "resume", job.id()}, "resume");
  ASSERT_EQ(rc, 0) << out;
  v1::Job done = tunerd.watch(job.id());
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error() << "\n" << tunerd.log();
  auto [distinct, trials] = trial_configs(tunerd, job.id());
  EXPECT_EQ(distinct, 24u);
  EXPECT_EQ(trials, 24u);
  // Only an ended job that did not succeed can be resumed.
  std::tie(rc, out) = tune_client_output(farm_, {"--server", tunerd.address(), "resume", job.id()}, "resume-again");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("only a FAILED or CANCELLED job"), std::string::npos) << out;
}

// The only agent killed mid-job: `status` and `jobs` say within seconds that the job waits for an
// agent (the tracker holds its batch for 30 s before it answers), and a new agent finishes it.
TEST_F(JobFaultTest, ALostAgentIsShownAtOnceAndANewOneFinishesTheJob) {
  Tunerd tunerd(farm_, data_dir("data"));
  v1::JobSpec s = spec("matmul:M=64,N=64,K=64", 24, 8);
  s.set_strategy(v1::RANDOM);
  v1::Job job = submit(tunerd, s);
  for (int i = 0; i < 600 && tunerd.records(job.id()).size() < 8; ++i) std::this_thread::sleep_for(milliseconds(50));
  farm_.agent("cpu-0").signal(SIGKILL);
  auto killed = std::chrono::steady_clock::now();
  v1::Job waiting;
  while (std::chrono::steady_clock::now() - killed < seconds(15)) {
    waiting = tunerd.get(job.id());
    if (waiting.activity().find("waiting for an agent of key 'local-cpu'") != std::string::npos) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  ASSERT_NE(waiting.activity().find("waiting for an agent of key 'local-cpu'"), std::string::npos)
      << waiting.activity() << "\n" << tunerd.log();
  EXPECT_LT(took, 8.0);
  // `jobs` lists the running job as `status` shows it.
  grpc::ClientContext context;
  v1::ListJobsResponse listed;
  ASSERT_TRUE(tunerd.stub()->ListJobs(&context, v1::ListJobsRequest(), &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_NE(listed.jobs(0).activity().find("waiting for an agent"), std::string::npos) << listed.jobs(0).activity();

  farm_.start_agent("cpu-1");
  v1::Job done = tunerd.watch(job.id());
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error() << "\n" << tunerd.log();
  EXPECT_EQ(trial_configs(tunerd, job.id()).first, 24u);
}

// A time budget that ends before the first batch is measured: the job did not succeed, its elapsed
// time is the time it ran, and a budget without a unit is refused before anything is submitted.
TEST_F(JobFaultTest, ATimeBudgetThatMeasuredNothingIsNotASuccess) {
  Tunerd tunerd(farm_, data_dir("data"));
  auto [rc, out] = tune_client_output(farm_, {"--server", tunerd.address(), "submit", "--workload",
                                              "matmul:M=64,N=64,K=64", "--trials", "8", "--time-budget", "3"},
                                      "unitless");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("needs a unit: 3s, 3m or 3h"), std::string::npos) << out;

  // The only agent stops answering: the first batch waits in the tracker past the budget.
  farm_.agent("cpu-0").signal(SIGSTOP);
  v1::JobSpec s = spec("matmul:M=64,N=64,K=64", 16, 8);
  s.set_time_budget_s(2);
  v1::Job job = submit(tunerd, s);
  v1::Job done = tunerd.watch(job.id());
  farm_.agent("cpu-0").signal(SIGCONT);
  EXPECT_EQ(done.state(), v1::FAILED) << tunerd.log();
  EXPECT_NE(done.error().find("before any candidate was measured"), std::string::npos) << done.error();
  EXPECT_GE(done.progress().elapsed_s(), 1.9);
  EXPECT_EQ(done.progress().trials_done(), 0);
}

// tunerd killed while it re-measures the best candidates: the resumed job measures only the
// rounds still missing, so that it ends with exactly its planned re-measurements.
TEST_F(JobFaultTest, TunerdKilledWhileReMeasuringResumesTheReMeasurement) {
  Tunerd tunerd(farm_, data_dir("data"));
  v1::JobSpec s = spec("matmul:M=64,N=64,K=64", 48, 16);
  s.set_strategy(v1::RANDOM);
  // Slow measurements leave time to kill tunerd in the middle of the re-measurement.
  s.mutable_measure()->set_repeat(1);
  s.mutable_measure()->set_min_repeat_ms(150);
  v1::Job job = submit(tunerd, s);
  size_t remeasured = 0;
  for (int i = 0; i < 1200; ++i) {
    remeasured = 0;
    for (const v1::Record& r : tunerd.records(job.id())) remeasured += r.remeasure_round() > 0;
    if (remeasured >= 4 || ended(tunerd.get(job.id()))) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_GE(remeasured, 4u) << tunerd.log();
  ASSERT_LT(remeasured, 12u) << "the re-measurement ended before tunerd could be killed";
  tunerd.kill9();
  tunerd.start();
  v1::Job done = tunerd.watch(job.id());
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error() << "\n" << tunerd.log();
  std::map<std::pair<std::string, int>, int> rounds;  // (config, round) -> records
  for (const v1::Record& r : tunerd.records(job.id()))
    if (r.remeasure_round() > 0) ++rounds[{from_proto(r.config()).to_json(), r.remeasure_round()}];
  size_t total = 0;
  for (const auto& [key, n] : rounds) {
    EXPECT_EQ(n, 1) << key.first << " round " << key.second << " measured " << n << " times";
    total += n;
  }
  // 5 candidates, and the default as one more unless it is among them, 3 rounds each.
  EXPECT_GE(total, 15u);
  EXPECT_LE(total, 18u);
  EXPECT_EQ(static_cast<size_t>(done.progress().remeasured()), total);
  EXPECT_EQ(done.progress().remeasure_budget(), done.progress().remeasured());
  auto [distinct, trials] = trial_configs(tunerd, job.id());
  EXPECT_EQ(distinct, 48u);
}

// `build` uses a tuned config only when it beats the template's default measured on the same key
// by more than the noise, and says which workloads fell back: records of a real job, with one
// config made 2% faster than the default (fell back) and then 20% faster (used).
TEST_F(JobFaultTest, BuildSaysWhichWorkloadsFellBackToTheirDefault) {
  const std::string workload = "matmul:M=64,N=64,K=64";
  Tunerd tunerd(farm_, data_dir("data"));
  v1::JobSpec s = spec(workload, 8, 8);
  s.set_strategy(v1::RANDOM);
  v1::Job job = submit(tunerd, s);
  ASSERT_EQ(tunerd.watch(job.id()).state(), v1::SUCCEEDED) << tunerd.log();
  // The template's default, as a build from no records names it.
  std::string empty = data_dir("none.jsonl");
  std::ofstream(empty).close();
  auto [rc, out] = tune_client_output(
      farm_, {"build", "--workload", workload, "--from-records", empty, "-o", data_dir("untuned")}, "untuned");
  ASSERT_EQ(rc, 0) << out;
  auto manifest = nlohmann::json::parse(std::ifstream(data_dir("untuned") + "/manifest.json"));
  const auto& kernel = manifest["kernels"][0];
  nlohmann::json default_config = kernel.contains("chosen_config") ? kernel["chosen_config"] : kernel["config"];
  std::optional<v1::Record> base, other;
  for (const v1::Record& r : tunerd.records(job.id())) {
    if (r.result().error() != v1::OK || r.remeasure_round() > 0) continue;
    bool is_default = nlohmann::json::parse(from_proto(r.config()).to_json()) == default_config;
    if (is_default && !base) base = r;
    if (!is_default && !other) other = r;
  }
  ASSERT_TRUE(base && other) << "the job measured the default and another config";
  for (double faster : {1.02, 1.2}) {
    v1::Record tuned = *other;
    tuned.mutable_result()->clear_costs();
    for (double c : base->result().costs()) tuned.mutable_result()->add_costs(c / faster);
    tuned.set_mean_cost_s(base->mean_cost_s() / faster);
    tuned.set_gflops(base->gflops() * faster);
    std::string records = data_dir(fmt::format("records-{}.jsonl", faster));
    std::ofstream(records) << record_to_json_line(*base) << "\n" << record_to_json_line(tuned) << "\n";
    std::string dir = data_dir(fmt::format("built-{}", faster));
    std::tie(rc, out) = tune_client_output(
        farm_, {"build", "--workload", workload, "--from-records", records, "-o", dir}, fmt::format("build-{}", faster));
    ASSERT_EQ(rc, 0) << out;
    bool fell_back = out.find("does not beat the template's default") != std::string::npos;
    EXPECT_EQ(fell_back, faster < 1.05) << faster << ": " << out;
    auto built = nlohmann::json::parse(std::ifstream(dir + "/manifest.json"));
    const auto& k = built["kernels"][0];
    nlohmann::json used = k.contains("chosen_config") ? k["chosen_config"] : k["config"];
    EXPECT_EQ(used == default_config, faster < 1.05) << faster << ": " << used.dump();
  }
}

// tunerd killed mid-job: the resumed job's clock goes on from where it was, as `status` shows it.
TEST_F(JobFaultTest, AResumedJobsElapsedTimeGoesOnFromWhereItWas) {
  Tunerd tunerd(farm_, data_dir("data"));
  v1::JobSpec s = spec("matmul:M=64,N=64,K=64", 64, 4);
  s.set_strategy(v1::RANDOM);
  // Slow measurements: the job runs long enough for its clock to mean something.
  s.mutable_measure()->set_repeat(1);
  s.mutable_measure()->set_min_repeat_ms(150);
  v1::Job job = submit(tunerd, s);
  v1::Job before;
  for (int i = 0; i < 600; ++i) {
    before = tunerd.get(job.id());
    if (before.progress().elapsed_s() >= 6 || ended(before)) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_EQ(before.state(), v1::RUNNING) << "the job ended before tunerd could be killed\n" << tunerd.log();
  ASSERT_GE(before.progress().elapsed_s(), 6) << tunerd.log();
  tunerd.kill9();
  tunerd.start();
  v1::Job after;
  for (int i = 0; i < 600; ++i) {
    after = tunerd.get(job.id());
    if (after.state() == v1::RUNNING && after.progress().trials_done() > before.progress().trials_done()) break;
    if (ended(after)) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  // What the history kept of the clock: its last saved progress, at most a batch behind.
  EXPECT_GE(after.progress().elapsed_s(), before.progress().elapsed_s() - 2) << tunerd.log();
  auto [rc, out] = tune_client_output(farm_, {"--server", tunerd.address(), "status", job.id()}, "status");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out.find("elapsed 0s"), std::string::npos) << out;
  EXPECT_EQ(out.find("elapsed 1s"), std::string::npos) << out;
  v1::Job done = tunerd.watch(job.id());
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error() << "\n" << tunerd.log();
  EXPECT_GT(done.progress().elapsed_s(), before.progress().elapsed_s());
}

// A history damaged on disk: tunerd refuses it and names --salvage; `tunerd --salvage` copies its
// records and its jobs, states and all, into a new data directory; tunerd started there lists the
// finished job with its records and finishes the job that was running.
TEST_F(JobFaultTest, ADamagedHistoryIsSalvagedWithItsJobs) {
  std::string data = data_dir("data");
  std::string history = data + "/history.db";
  v1::Job finished, running;
  size_t finished_records = 0;
  {
    Tunerd tunerd(farm_, data);
    v1::JobSpec s = spec("matmul:M=48,N=48,K=48", 16, 8);
    s.set_strategy(v1::RANDOM);
    s.set_name("finished-one");
    finished = submit(tunerd, s);
    ASSERT_EQ(tunerd.watch(finished.id()).state(), v1::SUCCEEDED) << tunerd.log();
    finished_records = tunerd.records(finished.id()).size();
    s = spec("matmul:M=64,N=64,K=64", 32, 8);
    s.set_strategy(v1::RANDOM);
    running = submit(tunerd, s);
    for (int i = 0; i < 600 && tunerd.records(running.id()).size() < 8; ++i)
      std::this_thread::sleep_for(milliseconds(50));
    ASSERT_EQ(tunerd.get(running.id()).state(), v1::RUNNING) << tunerd.log();
    tunerd.stop();  // The job stays RUNNING in the history, to resume at the next start.
  }
  ASSERT_FALSE(std::filesystem::exists(history + "-wal") && std::filesystem::file_size(history + "-wal") > 0)
      << "a clean stop folds the WAL into the file";
  // Random bytes over the records' identity index: every row is still readable, but the file fails
  // SQLite's check, as a disk or a copy that went wrong leaves it.
  int64_t page = 0, page_size = 0;
  {
    auto connection = db::Connection::open(history, db::Connection::Mode::kReadOnly, seconds(1));
    ASSERT_TRUE(connection.ok()) << connection.status().to_string();
    page = *(*connection)->query_int("SELECT rootpage FROM sqlite_master WHERE name = 'records_identity'");
    page_size = *(*connection)->query_int("PRAGMA page_size");
  }
  {
    std::mt19937 random(31);
    std::string junk(static_cast<size_t>(page_size), '\0');
    for (char& c : junk) c = static_cast<char>(random());
    std::fstream file(history, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp((page - 1) * page_size);
    file.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto tunerd_args = [&](const std::string& dir) {
    return std::vector<std::string>{"--listen", fmt::format("127.0.0.1:{}", free_port()), "--tracker",
                                    farm_.address(), "--data-dir", dir, "--metrics-listen", "off"};
  };
  Process refused(bin_path("tunerd"), tunerd_args(data), data_dir("tunerd-damaged.log"));
  int status = refused.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << refused.log();
  EXPECT_NE(refused.log().find("tunerd --salvage"), std::string::npos) << refused.log();

  std::string salvaged = data_dir("salvaged");
  Process salvage(bin_path("tunerd"), {"--salvage", history, "--data-dir", salvaged}, data_dir("salvage.log"));
  status = salvage.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << salvage.log();
  EXPECT_NE(salvage.log().find("and 2 jobs into"), std::string::npos) << salvage.log();

  Tunerd tunerd(farm_, salvaged);
  auto [rc, out] = tune_client_output(farm_, {"--server", tunerd.address(), "jobs"}, "jobs");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(finished.id()), std::string::npos) << out;
  EXPECT_NE(out.find("finished-one"), std::string::npos) << out;
  EXPECT_NE(out.find(running.id()), std::string::npos) << out;
  EXPECT_EQ(tunerd.get(finished.id()).state(), v1::SUCCEEDED);
  EXPECT_EQ(tunerd.records(finished.id()).size(), finished_records);
  std::tie(rc, out) = tune_client_output(farm_, {"--server", tunerd.address(), "records", "--job", finished.id()},
                                         "records");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(fmt::format("{} records", finished_records)), std::string::npos) << out;
  v1::Job done = tunerd.watch(running.id());
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error() << "\n" << tunerd.log();
  auto [distinct, trials] = trial_configs(tunerd, running.id());
  EXPECT_EQ(distinct, 32u);
  EXPECT_EQ(trials, 32u);
}

}  // namespace
}  // namespace tunefarm::testing
