// tunerd end to end: a real tracker, a real CPU agent and a real tunerd on 127.0.0.1, driven
// through the Tuner service and tune-client — jobs that finish with their budget, a tunerd killed
// with SIGKILL mid-job that resumes without measuring anything twice, two clients at once, and
// history moving between installations through export and import.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <onnx/onnx_pb.h>

#include "common/wire/wire.h"
#include "tests/integration/farm_harness.h"
#include "tests/integration/tunerd_harness.h"
#include "tunefarm/v1/tuner.grpc.pb.h"

namespace tunefarm::testing {
namespace {

size_t records_of_remeasure(const Tunerd& tunerd, const std::string& job_id) {
  size_t n = 0;
  for (const auto& r : tunerd.records(job_id)) n += r.remeasure_round() > 0;
  return n;
}

std::set<std::string> distinct_configs(const std::vector<v1::Record>& records) {
  std::set<std::string> out;
  for (const auto& r : records) out.insert(from_proto(r.config()).to_json());
  return out;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    farm_.start_agent("cpu-0");
    ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(20))) << farm_.logs();
  }
  std::string data_dir(const std::string& name) { return farm_.log_dir() + "/" + name; }
  Farm farm_;
};

// The job's winner, its status, `best` and `best --json` agree (one rule for a config's figure:
// common/figure.h, over trials and recorded re-measurements), and `best --json` lines import.
TEST_F(ServiceTest, AJobMeasuresItsBudgetAndItsWinnerIsWhatBestAnswers) {
  Tunerd tunerd(farm_, data_dir("data"));
  auto job = tunerd.submit("matmul:M=256,N=256,K=256", 64);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  v1::Job done = tunerd.watch(job->id());
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error() << "\n" << tunerd.log();
  auto records = tunerd.records(job->id());
  int trials = 0, remeasured = 0;
  double fastest = 0;
  for (const auto& r : records) {
    (r.remeasure_round() == 0 ? trials : remeasured)++;
    fastest = std::max(fastest, r.gflops());
  }
  EXPECT_EQ(trials, 64);
  EXPECT_EQ(remeasured, 15);  // The best 5, in 3 interleaved rounds.
  EXPECT_EQ(distinct_configs(records).size(), 64u);
  // A naive loop nest runs this GEMM at 1-2 GFLOP/s; any tuned kernel on an AVX2 core, even on a
  // loaded machine, at well over 10.
  EXPECT_GT(fastest, 10.0);
  auto best = tunerd.best("matmul:M=256,N=256,K=256");
  ASSERT_EQ(best.size(), 1u);
  ASSERT_EQ(done.progress().tasks_size(), 1);
  EXPECT_DOUBLE_EQ(best[0].gflops(), done.progress().tasks(0).best_gflops());
  EXPECT_DOUBLE_EQ(best[0].gflops(), done.progress().best_gflops());
  EXPECT_EQ(from_proto(best[0].config()).to_json(), from_proto(done.progress().tasks(0).best_config()).to_json());

  // The same answer through the command line, as a record line that imports elsewhere.
  int rc = 0;
  std::string out = tune_client({"--server", tunerd.address(), "best", "--workload", "matmul:M=256,N=256,K=256", "--json"}, &rc);
  EXPECT_EQ(rc, 0) << out;
  auto line = record_from_json_line(out.substr(0, out.find('\n')));
  ASSERT_TRUE(line.ok()) << line.status().to_string() << "\n" << out;
  EXPECT_EQ(from_proto(line->config()).to_json(), from_proto(best[0].config()).to_json());
  EXPECT_DOUBLE_EQ(line->gflops(), best[0].gflops());
  std::string file = data_dir("best.jsonl");
  {
    std::ofstream(file) << out;
  }
  Tunerd other(farm_, data_dir("other"));
  std::string imported = tune_client({"--server", other.address(), "import", file, "--json"}, &rc);
  EXPECT_EQ(rc, 0) << imported;
  EXPECT_THAT(imported, ::testing::HasSubstr("\"imported\":1"));
  auto best_there = other.best("matmul:M=256,N=256,K=256");
  ASSERT_EQ(best_there.size(), 1u);
  EXPECT_DOUBLE_EQ(best_there[0].gflops(), best[0].gflops());
}

TEST_F(ServiceTest, TunerdKilledMidJobResumesAndEndsWithExactlyItsBudget) {
  Tunerd tunerd(farm_, data_dir("data"));
  auto job = tunerd.submit("matmul:M=96,N=96,K=96", 96);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  // Let it record part of the budget, then kill it without warning.
  size_t recorded = 0;
  for (int i = 0; i < 600 && recorded < 24; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    recorded = tunerd.records(job->id()).size();
  }
  ASSERT_GE(recorded, 24u) << tunerd.log();
  tunerd.kill9();
  tunerd.start();
  v1::Job done = tunerd.watch(job->id());
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error() << "\n" << tunerd.log();
  auto records = tunerd.records(job->id());
  EXPECT_EQ(distinct_configs(records).size(), 96u);
  EXPECT_EQ(done.progress().trials_done(), 96);
}

// A full disk pauses a job instead of stalling or losing it: a file-size limit lowered on the running
// tunerd makes every history write fail (EFBIG, as ENOSPC would); the job says why and measures
// nothing more; once the limit is lifted the held measurements are written and the job ends with
// exactly its budget.
TEST_F(ServiceTest, AFullDiskPausesTheJobAndNothingMeasuredIsLost) {
  Tunerd tunerd(farm_, data_dir("data"));
  auto job = tunerd.submit("matmul:M=64,N=64,K=64", 48, 8);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  for (int i = 0; i < 600 && tunerd.records(job->id()).size() < 8; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto limit = [&](const std::string& size) {
    std::string cmd = fmt::format("prlimit --pid {} --fsize={}:unlimited", tunerd.pid(), size);
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  };
  limit("4096");
  v1::Job paused;
  for (int i = 0; i < 300; ++i) {
    paused = tunerd.get(job->id());
    if (!paused.activity().empty() || paused.state() != v1::RUNNING) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(paused.state(), v1::RUNNING) << paused.error() << "\n" << tunerd.log();
  EXPECT_THAT(paused.activity(), ::testing::HasSubstr("paused: the history cannot be written since"));
  EXPECT_THAT(paused.activity(), ::testing::HasSubstr("the disk is full"));
  int rc = 0;
  std::string status = tune_client({"--server", tunerd.address(), "status", job->id()}, &rc);
  EXPECT_EQ(rc, 0) << status;
  EXPECT_THAT(status, ::testing::HasSubstr("paused"));
  // Paused: no more trials while the disk is full, and the clock goes on.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  v1::Job still = tunerd.get(job->id());
  EXPECT_EQ(still.progress().trials_done(), paused.progress().trials_done());
  EXPECT_GT(still.progress().elapsed_s(), paused.progress().elapsed_s() + 1.5);
  // A submit meanwhile is refused with the reason, not left hanging.
  auto refused = tunerd.submit("matmul:M=32,N=32,K=32", 8, 8);
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("cannot be written"));

  limit("unlimited");
  v1::Job done = tunerd.watch(job->id());
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error() << "\n" << tunerd.log();
  auto records = tunerd.records(job->id());
  int trials = 0;
  for (const auto& r : records) trials += r.remeasure_round() == 0;
  EXPECT_EQ(trials, 48);
  EXPECT_EQ(distinct_configs(records).size(), 48u);
  EXPECT_EQ(done.progress().trials_done(), 48);
  EXPECT_TRUE(done.activity().empty());
}

// While paused on a full disk the history's WAL is folded into the file and truncated: a disk
// filled by the WAL itself gets its room back and the job goes on with the limit still in place,
// where a WAL left to grow kept every write failing until the limit was lifted. The limit leaves
// the file room to grow by what the job writes, but not the WAL room to hold it all.
TEST_F(ServiceTest, AWalThatFillsTheDiskIsCheckpointedWhilePaused) {
  std::string data = data_dir("data");
  Tunerd tunerd(farm_, data);
  auto job = tunerd.submit("matmul:M=64,N=64,K=64", 48, 4);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  for (int i = 0; i < 600 && tunerd.records(job->id()).size() < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto size = [&](const std::string& name) -> uintmax_t {
    std::error_code ec;
    auto bytes = std::filesystem::file_size(data + "/" + name, ec);
    return ec ? 0 : bytes;
  };
  // The WAL holds everything since tunerd started; the file grows by about 100 KiB in this job.
  uintmax_t limit = std::max(size("history.db") + (512 << 10), size("history.db-wal") + (64 << 10));
  std::string cmd = fmt::format("prlimit --pid {} --fsize={}:unlimited", tunerd.pid(), limit);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  v1::Job now;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(90);
       std::chrono::steady_clock::now() < until;) {
    now = tunerd.get(job->id());
    if (now.state() != v1::RUNNING) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(tunerd.log().find("history writes are failing"), std::string::npos)
      << "the WAL never reached the limit of " << limit << " bytes\n" << tunerd.log();
  EXPECT_NE(tunerd.log().find("history writes succeed again"), std::string::npos) << tunerd.log();
  ASSERT_EQ(now.state(), v1::SUCCEEDED) << now.activity() << " " << now.error() << "\n" << tunerd.log();
  EXPECT_LE(size("history.db-wal"), limit);
  EXPECT_LE(size("history.db"), limit);
  auto records = tunerd.records(job->id());
  EXPECT_EQ(distinct_configs(records).size(), 48u);
  EXPECT_EQ(now.progress().trials_done(), 48);
}

#ifdef TUNEFARM_TEST_MODELS
// A model in: its task table from tunerd, mistakes as one-line errors that leave tunerd serving,
// and one job over all its tasks in which every task gets trials and records are ordinary ones.
TEST_F(ServiceTest, AModelsTasksAreTunedAsOneJob) {
  Tunerd tunerd(farm_, data_dir("data"));
  std::string resnet = std::string(TUNEFARM_TEST_MODELS) + "/resnet50_small.onnx";
  int rc = 0;
  std::string out = tune_client({"--server", tunerd.address(), "tasks", "--model", resnet, "--json"}, &rc);
  ASSERT_EQ(rc, 0) << out;
  auto table = nlohmann::json::parse(out);
  int counted = 0, other_forms = 0;
  for (const auto& t : table["tasks"]) {
    // A convolution's Winograd form computes the nodes of another task: they count once.
    if (!t["alternative_of"].get<std::string>().empty()) {
      ++other_forms;
      EXPECT_THAT(t["workload"]["op"].get<std::string>(), ::testing::StartsWith("conv2d_nchwc"));
      continue;
    }
    counted += t["count"].get<int>();
  }
  EXPECT_EQ(counted, table["tunable_nodes"].get<int>());
  EXPECT_EQ(counted, 18);  // 17 convolutions and the classifier.
  EXPECT_EQ(other_forms, 1);  // the 3x3 at 16x16, as F(4x4)
  // The table as people read it says which form an untuned build takes (winograd_by_default).
  out = tune_client({"--server", tunerd.address(), "tasks", "--model", resnet}, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("winograd=4  (another way to compute row"));
  EXPECT_THAT(out, ::testing::HasSubstr("the build takes the faster; untuned, this one)"));
  // What one run touches (the rotation of the job's candidates) and the other steps' bytes.
  EXPECT_GT(table["run_bytes"].get<double>(), 0);
  EXPECT_LE(table["other_streaming_bytes"].get<double>(), table["other_bytes"].get<double>());

  std::string bert = std::string(TUNEFARM_TEST_MODELS) + "/bert_layer_small.onnx";
  out = tune_client({"--server", tunerd.address(), "tasks", "--model", bert}, &rc);
  EXPECT_NE(rc, 0);
  std::string junk = data_dir("junk.onnx");
  {
    std::ofstream(junk) << "this is not a model";
  }
  out = tune_client({"--server", tunerd.address(), "tasks", "--model", junk, "--json"}, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_THAT(out, ::testing::HasSubstr("not an ONNX model"));
  out = tune_client({"--server", tunerd.address(), "tasks", "--model", bert, "--input-shape", "hidden_states=1,16,64"}, &rc);
  EXPECT_EQ(rc, 0) << out << tunerd.log();
  EXPECT_THAT(out, ::testing::HasSubstr("dense:M=16,N=64,K=64,bias=1"));
  // A transformer layer's other steps are row-wise and transposes: none streams.
  EXPECT_THAT(out, ::testing::HasSubstr("(0.00 MB by elementwise steps and pooling)"));
  EXPECT_THAT(out, ::testing::HasSubstr("one run touches"));

  // A model the build cannot run is refused by `tasks` and `submit --model`, naming its nodes,
  // before any job exists (the one job below is the only one).
  std::string unbuildable = std::string(TUNEFARM_TEST_MODELS) + "/unbuildable_small.onnx";
  std::tie(rc, out) = tune_client_output(farm_, {"--server", tunerd.address(), "tasks", "--model", unbuildable}, "tasks");
  EXPECT_NE(rc, 0);
  EXPECT_THAT(out, ::testing::HasSubstr("node 'lp_norm' (LpNormalization)"));
  EXPECT_THAT(out, ::testing::HasSubstr("node 'determinant' (Det)"));
  std::tie(rc, out) = tune_client_output(
      farm_, {"--server", tunerd.address(), "submit", "--model", unbuildable, "--trials", "8"}, "submit");
  EXPECT_NE(rc, 0);
  EXPECT_THAT(out, ::testing::HasSubstr("node 'determinant' (Det)"));
  // External data is read beside the model by tune-client and uploaded with it; a location outside
  // the model's folder is refused.
  auto with_external_weight = [&](const std::string& path, const std::string& location) {
    onnx::ModelProto proto;
    std::ifstream in(resnet, std::ios::binary);
    ASSERT_TRUE(proto.ParseFromIstream(&in));
    auto* t = proto.mutable_graph()->mutable_initializer(0);
    std::string data = t->raw_data();
    if (data.empty()) data.assign(reinterpret_cast<const char*>(t->float_data().data()), t->float_data_size() * sizeof(float));
    t->clear_float_data();
    t->clear_raw_data();
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = t->add_external_data();
    kv->set_key("location");
    kv->set_value(location);
    std::ofstream(path, std::ios::binary) << proto.SerializeAsString();
    std::ofstream(std::filesystem::path(path).parent_path() / "weights.data", std::ios::binary) << data;
  };
  std::string beside = data_dir("beside.onnx");
  with_external_weight(beside, "weights.data");
  out = tune_client({"--server", tunerd.address(), "tasks", "--model", beside, "--json"}, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(nlohmann::json::parse(out)["tasks"].size(), table["tasks"].size());
  std::string outside = data_dir("outside.onnx");
  with_external_weight(outside, "../weights.data");
  std::tie(rc, out) = tune_client_output(farm_, {"--server", tunerd.address(), "tasks", "--model", outside}, "outside");
  EXPECT_NE(rc, 0);
  EXPECT_THAT(out, ::testing::HasSubstr("location '../weights.data' leaves the model's folder"));

  out = tune_client({"--server", tunerd.address(), "submit", "--model", resnet, "--trials", "40", "--watch", "--json"}, &rc);
  ASSERT_EQ(rc, 0) << out << tunerd.log();
  auto jobs = tunerd.stub();
  grpc::ClientContext context;
  v1::ListJobsRequest request;
  v1::ListJobsResponse response;
  ASSERT_TRUE(jobs->ListJobs(&context, request, &response).ok());
  ASSERT_EQ(response.jobs_size(), 1);
  const v1::Job& job = response.jobs(0);
  EXPECT_EQ(job.state(), v1::SUCCEEDED) << job.error();
  EXPECT_EQ(job.spec().name(), "resnet50_small.onnx");
  ASSERT_EQ(job.progress().tasks_size(), 19);  // the 18 and the Winograd form of one
  for (const auto& t : job.progress().tasks()) EXPECT_GT(t.trials_done(), 0) << t.workload().ShortDebugString();
  auto best = tunerd.best(from_proto(job.progress().tasks(0).workload())->to_string());
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].job_id(), job.id());
  // Each task weighs as often as it occurs, and the job estimates the model's latency from its
  // tasks, tuned and with the untuned defaults measured in their first rounds.
  EXPECT_EQ(job.progress().tasks(0).weight(), 1);
  double weights = 0;
  for (const auto& t : job.progress().tasks()) {
    weights += t.weight();
    EXPECT_GT(t.flops(), 0);
    EXPECT_GT(t.default_gflops(), 0) << t.workload().ShortDebugString();
  }
  EXPECT_EQ(weights, 19);
  out = tune_client({"--server", tunerd.address(), "status", job.id()}, &rc);
  EXPECT_THAT(out, ::testing::ContainsRegex("model ~[0-9.]+ ms \\(untuned [0-9.]+ ms\\)"));
  // The re-measurement is sized to the job (a third of its trials over all tasks), not five
  // candidates three times for each of its 18 tasks, and the progress counts it.
  EXPECT_LE(records_of_remeasure(tunerd, job.id()), 13u);
  EXPECT_EQ(static_cast<size_t>(job.progress().remeasured()), records_of_remeasure(tunerd, job.id()));
  // `jobs` names the job and sums up a model's tasks on one line.
  out = tune_client({"--server", tunerd.address(), "jobs"}, &rc);
  EXPECT_THAT(out, ::testing::HasSubstr("resnet50_small.onnx"));
  EXPECT_THAT(out, ::testing::HasSubstr("19 tasks (18 conv2d_nchwc, 1 dense)"));
}
#endif

// A listing of large records is paged to stay under 2 MiB an answer (the read-only token may list
// everything, and a record may hold a 4 KiB error message); `records` pages through all of them.
TEST_F(ServiceTest, RecordListingsArePagedByBytes) {
  Tunerd tunerd(farm_, data_dir("data"));
  auto job = tunerd.submit("matmul:M=16,N=16,K=16", 8, 8);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  ASSERT_EQ(tunerd.watch(job->id()).state(), v1::SUCCEEDED) << tunerd.log();
  v1::Record base = tunerd.records(job->id()).front();
  std::string file = data_dir("large.jsonl");
  {
    std::ofstream out(file);
    for (int i = 0; i < 1500; ++i) {
      v1::Record r = base;
      r.set_job_id("job-large");
      r.mutable_result()->set_started_at_us(1'700'000'000'000'000 + i);
      r.mutable_result()->set_error(v1::RUNTIME_ERROR);
      r.mutable_result()->clear_costs();
      r.mutable_result()->set_error_msg(std::string(4000, 'x'));
      r.set_mean_cost_s(0);
      r.set_gflops(0);
      out << record_to_json_line(r) << "\n";
    }
  }
  int rc = 0;
  std::string out = tune_client({"--server", tunerd.address(), "import", file}, &rc);
  ASSERT_EQ(rc, 0) << out;
  std::set<int64_t> seen;
  int64_t offset = 0;
  int pages = 0;
  for (;;) {
    grpc::ClientContext context;
    v1::ListRecordsRequest request;
    request.set_limit(10000);
    request.set_offset(offset);
    v1::ListRecordsResponse response;
    ASSERT_TRUE(tunerd.stub()->ListRecords(&context, request, &response).ok());
    EXPECT_LT(response.ByteSizeLong(), size_t{2} << 20);
    ++pages;
    for (const auto& r : response.records()) EXPECT_TRUE(seen.insert(r.result().started_at_us()).second);
    if (response.next_offset() == 0) break;
    EXPECT_EQ(response.next_offset(), offset + response.records_size());
    offset = response.next_offset();
  }
  EXPECT_GT(pages, 2);
  EXPECT_EQ(seen.size(), 1500u + 8u + records_of_remeasure(tunerd, job->id()));
  out = tune_client({"--server", tunerd.address(), "records", "--job", "job-large", "--limit", "1200", "--json"}, &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(nlohmann::json::parse(out)["records"].size(), 1200u);
}

TEST_F(ServiceTest, TwoClientsSubmittingAtOnceBothFinish) {
  Tunerd tunerd(farm_, data_dir("data"));
  v1::Job results[2];
  std::thread clients[2];
  const char* workloads[2] = {"matmul:M=64,N=64,K=64", "dense:M=16,N=64,K=64"};
  for (int i = 0; i < 2; ++i) {
    clients[i] = std::thread([&, i] {
      auto job = tunerd.submit(workloads[i], 32);
      ASSERT_TRUE(job.ok()) << job.status().to_string();
      results[i] = tunerd.watch(job->id());
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(results[i].state(), v1::SUCCEEDED) << workloads[i] << ": " << results[i].error();
    EXPECT_EQ(distinct_configs(tunerd.records(results[i].id())).size(), 32u);
  }
}

TEST_F(ServiceTest, ExportThenImportIntoAFreshDatabaseGivesTheSameBestAnswers) {
  Tunerd first(farm_, data_dir("first"));
  const char* workloads[2] = {"matmul:M=64,N=48,K=32", "batch_matmul:B=2,M=32,N=32,K=16"};
  size_t recorded = 0;  // 24 trials per job, and the re-measurements of its best.
  for (const char* w : workloads) {
    auto job = first.submit(w, 24, 8);
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    ASSERT_EQ(first.watch(job->id()).state(), v1::SUCCEEDED) << first.log();
    recorded += first.records(job->id()).size();
  }
  ASSERT_GT(recorded, 48u);
  std::string file = farm_.log_dir() + "/export.jsonl";
  int rc = 0;
  std::string out = tune_client({"--server", first.address(), "export", file}, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr(fmt::format("exported {} records", recorded)));

  Tunerd second(farm_, data_dir("second"));
  out = tune_client({"--server", second.address(), "import", file}, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr(fmt::format("imported {} records", recorded)));
  out = tune_client({"--server", second.address(), "import", file}, &rc);
  EXPECT_THAT(out, ::testing::HasSubstr("imported 0 records")) << "a second import must add nothing";

  for (const char* w : workloads) {
    auto a = first.best(w, 5), b = second.best(w, 5);
    ASSERT_EQ(a.size(), b.size()) << w;
    ASSERT_FALSE(a.empty());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(from_proto(a[i].config()).to_json(), from_proto(b[i].config()).to_json());
      EXPECT_DOUBLE_EQ(a[i].gflops(), b[i].gflops());
      EXPECT_EQ(a[i].result().costs_size(), b[i].result().costs_size());
    }
  }
}

// tunerd answers ListRecords in pages of at most 2 MiB; `records --limit N` asks again until it
// has N, and shows each record once, in order, whether printed for people or as JSON.
TEST_F(ServiceTest, RecordsPagesThroughAnswersLargerThanOneResponse) {
  Tunerd tunerd(farm_, data_dir("data"));
  // As large as an importable line lets a record be: the longest error message and thousands of
  // costs. Record i started at i + 1, which says which record a listing holds.
  constexpr int kRecords = 200;
  auto config = parse_config_json(
      R"({"template":"matmul.cpu.packed","knobs":{"tile_m":[-1,2,5],"tile_n":[-1,2,48],"unroll_k":1,)"
      R"("order":[0,1,2,3],"pack_b":1,"parallel":"none"}})");
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  v1::Record record;
  *record.mutable_workload() = to_proto(*parse_workload("matmul:M=256,N=256,K=256"));
  *record.mutable_target() = to_proto(*parse_target("llvm"));
  record.set_device_key("local-cpu");
  record.set_job_id("job-imported");
  *record.mutable_config() = to_proto(*config);
  record.mutable_result()->set_error_msg(std::string(4096, 'e'));
  for (int c = 0; c < 4000; ++c) record.mutable_result()->add_costs(1e-3 + c * 1e-9);
  record.mutable_result()->set_agent_id("agent-1");
  std::string file = data_dir("large.jsonl");
  {
    std::ofstream out(file);
    for (int i = 0; i < kRecords; ++i) {
      record.mutable_result()->set_started_at_us(i + 1);
      record.mutable_result()->set_finished_at_us(i + 2);
      std::string line = record_to_json_line(record);
      ASSERT_LE(line.size(), kMaxRecordLineBytes);
      out << line << '\n';
    }
  }
  ASSERT_GT(record.ByteSizeLong() * kRecords, size_t{6} << 20) << "the listing must take several pages";
  int rc = 0;
  std::string out = tune_client({"--server", tunerd.address(), "import", file}, &rc);
  ASSERT_EQ(rc, 0) << out;

  out = tune_client({"--server", tunerd.address(), "records", "--limit", "150", "--offset", "20"}, &rc);
  ASSERT_EQ(rc, 0) << out;
  // A count that says how to see more, a header, and a line per record.
  EXPECT_THAT(out, ::testing::StartsWith(fmt::format("150 of {} records (the next with --offset 170;", kRecords)));
  EXPECT_THAT(out, ::testing::HasSubstr("\nRESULT "));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 152) << out.substr(0, 2000);

  out = tune_client({"--server", tunerd.address(), "records", "--limit", "150", "--offset", "20", "--json"}, &rc);
  ASSERT_EQ(rc, 0) << out.substr(0, 2000);
  v1::ListRecordsResponse listed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out, &listed).ok()) << out.substr(0, 2000);
  EXPECT_EQ(listed.total(), kRecords);
  ASSERT_EQ(listed.records_size(), 150);
  for (int i = 0; i < listed.records_size(); ++i) EXPECT_EQ(listed.records(i).result().started_at_us(), 20 + i + 1);
}

// Targets that once made LLVM abort tunerd (and every restart after it) are refused at submit,
// naming the bad part, and tunerd goes on serving.
TEST_F(ServiceTest, TargetsThatWouldAbortLlvmAreRefusedAndTunerdStaysUp) {
  Tunerd tunerd(farm_, data_dir("data"));
  for (const char* target : {"llvm -mcpu=nonexistent", "llvm -mtriple=riscv64-linux-gnu -mattr=+v"}) {
    int code = 0;
    tune_client({"--server", tunerd.address(), "submit", "--workload", "matmul:M=16,N=16,K=16", "--target", target,
                 "--device", "local-cpu", "--trials", "2"},
                &code);
    EXPECT_NE(code, 0) << target;
  }
  auto job = tunerd.submit("matmul:M=16,N=16,K=16", 2, 2);
  ASSERT_TRUE(job.ok()) << job.status().to_string() << "\n" << tunerd.log();
  EXPECT_EQ(tunerd.watch(job->id()).state(), v1::SUCCEEDED) << tunerd.log();
}

// Jobs for a target that none of a key's agents can run used to be accepted, and then every
// candidate failed on the agents. They are refused at submit with the key, what its agents are and
// the target; a target the agents run is still tuned.
TEST_F(ServiceTest, ATargetNoAgentOfTheKeyCanRunIsRefusedAtSubmit) {
  Tunerd tunerd(farm_, data_dir("data"));
  auto farm = farm_.queue_status();
  ASSERT_EQ(farm.keys_size(), 1);
  const v1::Capabilities& agent = farm.keys(0).agents(0).capabilities();
  ASSERT_FALSE(agent.arch().empty());
  const bool agent_has_cuda = std::count(agent.targets().begin(), agent.targets().end(), "cuda") > 0;
  const std::string agent_kind = fmt::format("1 agent, {} {} CUDA", agent.arch(), agent_has_cuda ? "with" : "without");

  // The agent runs on this machine; the triple names another architecture.
  std::vector<std::string> refused = {agent.arch() == "aarch64" ? "llvm -mtriple=x86_64-linux-gnu"
                                                                 : "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"};
  if (!agent_has_cuda) refused.push_back("cuda -arch=sm_90");
  for (const std::string& target : refused) {
    auto [code, out] = tune_client_output(farm_,
                                          {"--server", tunerd.address(), "submit", "--workload", "matmul:M=16,N=16,K=16",
                                           "--target", target, "--device", "local-cpu", "--trials", "2"},
                                          "refused");
    EXPECT_NE(code, 0) << target << "\n" << out;
    EXPECT_THAT(out, ::testing::HasSubstr("device key 'local-cpu' cannot run target '" + target + "'")) << out;
    EXPECT_THAT(out, ::testing::HasSubstr(agent_kind)) << out;
  }

  auto [code, out] = tune_client_output(farm_,
                                        {"--server", tunerd.address(), "submit", "--workload", "matmul:M=16,N=16,K=16",
                                         "--target", "llvm", "--device", "local-cpu", "--trials", "4", "--watch"},
                                        "accepted");
  EXPECT_EQ(code, 0) << out << "\n" << tunerd.log();

  grpc::ClientContext context;
  v1::ListJobsRequest request;
  v1::ListJobsResponse response;
  ASSERT_TRUE(tunerd.stub()->ListJobs(&context, request, &response).ok());
  ASSERT_EQ(response.jobs_size(), 1) << "a refused job was stored";
  EXPECT_EQ(response.jobs(0).state(), v1::SUCCEEDED);
}

// Mistakes get a reason: a misspelled command is named, a job id that does not exist is an error
// for records as it is for status, and a command asked for --json fails with a JSON object.
TEST_F(ServiceTest, ClientMistakesAreNamedAndJsonFailuresAreJson) {
  Tunerd tunerd(farm_, data_dir("data"));
  int code = 0;
  std::string out = tune_client({"--server", tunerd.address(), "sttaus", "job-1"}, &code);
  EXPECT_EQ(code, 1);
  out = tune_client({"--server", tunerd.address(), "records", "--job", "job-nope"}, &code);
  EXPECT_NE(code, 0) << out;
  out = tune_client({"--server", tunerd.address(), "status", "job-nope", "--json"}, &code);
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, ::testing::StartsWith("{\"error\":")) << out;
  // export and import take --json like every printing command.
  std::string file = data_dir("empty.jsonl");
  out = tune_client({"--server", tunerd.address(), "export", file, "--json"}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, ::testing::StartsWith("{\"exported\":0")) << out;
  out = tune_client({"--server", tunerd.address(), "import", file, "--json"}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, ::testing::StartsWith("{\"imported\":0")) << out;
}

// `watch` used to give up when tunerd restarted; it reconnects and follows the job to its end.
TEST_F(ServiceTest, WatchFollowsAJobAcrossATunerdRestart) {
  Tunerd tunerd(farm_, data_dir("data"));
  auto job = tunerd.submit("matmul:M=64,N=64,K=64", 48, 8);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  std::string out_path = data_dir("watch.out");
  Process watch(bin_path("tune-client"), {"--server", tunerd.address(), "watch", job->id()}, out_path);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  tunerd.stop();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  tunerd.start();
  int status = watch.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << watch.log() << "\n" << tunerd.log();
  EXPECT_NE(watch.log().find("reconnecting"), std::string::npos) << watch.log();
}

}  // namespace
}  // namespace tunefarm::testing
