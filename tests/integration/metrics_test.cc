// Prometheus metrics of real daemons: a tracker, two agents and tunerd on 127.0.0.1, scraped during
// and after a real tuning job, then while kernels crash and an agent is killed mid-batch; every
// counter is checked against what happened (trials, results by error code, requeues). Also: the
// endpoints under tokens, bad requests, the exposure rule and JSON logs.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/http/metrics.h"
#include "device_agent/metrics.h"
#include "tests/integration/farm_harness.h"
#include "tests/integration/http_harness.h"
#include "tests/integration/tunerd_harness.h"

namespace tunefarm::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string port_arg(int port) { return fmt::format("127.0.0.1:{}", port); }

// Waits until GET /metrics answers on `port`.
bool wait_for_endpoint(int port, const std::string& bearer = {}) {
  for (int i = 0; i < 200; ++i) {
    if (http_get(port, "/metrics", bearer).status != 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

class FarmMetricsTest : public ::testing::Test {
 protected:
  FarmMetricsTest() : tracker_port_(free_port()), farm_({"--metrics-listen", port_arg(tracker_port_)}) {}

  void TearDown() override {
    if (HasFailure()) std::cout << farm_.logs();
  }

  void start_agent(const std::string& id) {
    agent_ports_[id] = free_port();
    farm_.start_agent(id, "local-cpu", {"--metrics-listen", port_arg(agent_ports_[id])});
  }

  // The agents' counters, summed over the agents still running.
  double agents_sum(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    double total = 0;
    for (const auto& [id, port] : agent_ports_)
      if (farm_.agent(id).running()) total += scrape(port).sum(name, labels);
    return total;
  }

  int tracker_port_;
  Farm farm_;
  std::map<std::string, int> agent_ports_;
};

TEST_F(FarmMetricsTest, CountersMatchWhatHappenedDuringAJobCrashesAndAKilledAgent) {
  start_agent("victim");
  start_agent("survivor");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 2, std::chrono::seconds(20)));
  int tunerd_port = free_port();
  Tunerd tunerd(farm_, farm_.log_dir() + "/data", {"--metrics-listen", port_arg(tunerd_port)});
  ASSERT_TRUE(wait_for_endpoint(tracker_port_));
  ASSERT_TRUE(wait_for_endpoint(tunerd_port)) << tunerd.log();
  for (const auto& [id, port] : agent_ports_) ASSERT_TRUE(wait_for_endpoint(port)) << farm_.logs();

  // --- A real job, scraped while it runs. ---
  constexpr int kTrials = 24;
  auto job = tunerd.submit("matmul:M=64,N=64,K=64", kTrials, 8);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  bool seen_running = false;
  double leases_while_running = 0, trials_while_running = 0;
  v1::Job done;
  for (auto until = Clock::now() + std::chrono::minutes(3); Clock::now() < until;) {
    done = tunerd.get(job->id());
    if (done.state() == v1::SUCCEEDED || done.state() == v1::FAILED || done.state() == v1::CANCELLED) break;
    Scrape t = scrape(tunerd_port);
    if (done.state() == v1::RUNNING && t.get("tunefarm_tunerd_jobs", {{"state", "RUNNING"}}) == 1) {
      seen_running = true;
      trials_while_running = std::max(trials_while_running, t.sum("tunefarm_tunerd_trials_total"));
      leases_while_running = std::max(leases_while_running, scrape(tracker_port_).sum("tunefarm_tracker_leases_total"));
      EXPECT_EQ(scrape(tracker_port_).get("tunefarm_tracker_agents", {{"device_key", "local-cpu"}}), 2);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error() << tunerd.log();
  EXPECT_TRUE(seen_running) << "no scrape saw the job running";
  EXPECT_GT(leases_while_running, 0);
  EXPECT_LE(trials_while_running, kTrials);

  auto records = tunerd.records(job->id());
  int trials = 0, trials_ok = 0, remeasured = 0, not_built = 0;
  for (const auto& r : records) {
    if (r.remeasure_round() > 0) {
      ++remeasured;
      continue;
    }
    ++trials;
    trials_ok += r.result().error() == v1::OK;
    not_built += r.result().error() == v1::INVALID_CONFIG || r.result().error() == v1::COMPILE_ERROR;
  }
  ASSERT_EQ(trials, kTrials);
  Scrape tuner = scrape(tunerd_port);
  EXPECT_EQ(tuner.sum("tunefarm_tunerd_trials_total"), kTrials);
  EXPECT_EQ(tuner.get("tunefarm_tunerd_trials_total", {{"error", "OK"}}), trials_ok);
  EXPECT_EQ(tuner.sum("tunefarm_tunerd_remeasurements_total"), remeasured);
  EXPECT_EQ(tuner.sum("tunefarm_tunerd_builds_total"), kTrials);
  EXPECT_EQ(tuner.get("tunefarm_tunerd_build_seconds_count"), kTrials);
  EXPECT_EQ(tuner.get("tunefarm_tunerd_unmeasured_candidates_total"), 0);
  EXPECT_EQ(tuner.get("tunefarm_tunerd_jobs", {{"state", "SUCCEEDED"}}), 1);
  EXPECT_EQ(tuner.get("tunefarm_tunerd_jobs", {{"state", "RUNNING"}}), 0);
  EXPECT_GT(tuner.get("tunefarm_tunerd_history_write_seconds_count"), 0);
  // Every record, and the job's own state and progress, went through the writer.
  EXPECT_GE(tuner.get("tunefarm_tunerd_history_writes_total", {{"result", "committed"}}), records.size());

  // Everything the tracker answered is a record (the candidates that did not build never went).
  Scrape tracker = scrape(tracker_port_);
  double delivered = tracker.sum("tunefarm_tracker_results_total");
  EXPECT_EQ(delivered, static_cast<double>(records.size() - not_built));
  EXPECT_EQ(tracker.get("tunefarm_tracker_results_total", {{"device_key", "local-cpu"}, {"error", "OK"}}),
            trials_ok + remeasured);
  EXPECT_EQ(tracker.sum("tunefarm_tracker_leased_candidates_total"), delivered);  // Nothing requeued yet.
  EXPECT_EQ(tracker.get("tunefarm_tracker_dispatch_latency_seconds_count", {{"device_key", "local-cpu"}}), delivered);
  EXPECT_EQ(tracker.sum("tunefarm_tracker_requeued_candidates_total"), 0);
  EXPECT_EQ(tracker.get("tunefarm_tracker_agents_free", {{"device_key", "local-cpu"}}), 2);
  EXPECT_EQ(tracker.get("tunefarm_tracker_queued_candidates", {{"device_key", "local-cpu"}}), 0);
  // Each agent counted what it measured, and together what the tracker delivered.
  EXPECT_EQ(agents_sum("tunefarm_agent_measurements_total"), delivered);
  EXPECT_EQ(agents_sum("tunefarm_agent_measure_seconds_count"), delivered);

  // --- Kernels that crash: errors by code on the tracker and the agents, worker restarts. ---
  double restarts_before = agents_sum("tunefarm_agent_worker_restarts_total");
  MeasureOutcome crashed = farm_.measure(kernel_request("crash", 3));
  ASSERT_TRUE(crashed.status.ok()) << crashed.status.error_message();
  for (const auto& r : crashed.results) ASSERT_EQ(r.result().error(), v1::RUNTIME_ERROR) << r.result().error_msg();
  tracker = scrape(tracker_port_);
  EXPECT_EQ(tracker.get("tunefarm_tracker_results_total", {{"device_key", "local-cpu"}, {"error", "RUNTIME_ERROR"}}), 3);
  EXPECT_EQ(agents_sum("tunefarm_agent_errors_total", {{"error", "RUNTIME_ERROR"}}), 3);
  EXPECT_EQ(agents_sum("tunefarm_agent_measurements_total", {{"error", "RUNTIME_ERROR"}}), 3);
  // Each crash kills the worker; the candidates after the first crash each start a new one.
  EXPECT_GE(agents_sum("tunefarm_agent_worker_restarts_total") - restarts_before, 2);
  std::string agents_exposed;
  for (const auto& [id, port] : agent_ports_) agents_exposed += http_get(port, "/metrics").body;

  // --- An agent killed mid-batch: its unanswered candidates are requeued to the survivor. ---
  double ok_before = tracker.get("tunefarm_tracker_results_total", {{"device_key", "local-cpu"}, {"error", "OK"}});
  double ended_before = tracker.sum("tunefarm_tracker_agent_sessions_ended_total");
  v1::MeasureRequest request = kernel_request("matmul", 32);
  request.mutable_options()->set_number(0);
  request.mutable_options()->set_min_repeat_ms(25);
  bool killed = false;
  MeasureOutcome out = farm_.measure(request, [&](const v1::MeasureResponse& r, int) {
    if (!killed && r.result().agent_id() == "victim") {
      killed = true;
      farm_.agent("victim").signal(SIGKILL);
    }
  });
  ASSERT_TRUE(killed);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_EQ(out.results.size(), 32u);
  int retried = 0;
  for (const auto& r : out.results) {
    EXPECT_EQ(r.result().error(), v1::OK) << r.result().error_msg();
    retried += r.result().attempts() - 1;
  }
  ASSERT_GT(retried, 0);
  tracker = scrape(tracker_port_);
  EXPECT_EQ(tracker.sum("tunefarm_tracker_requeued_candidates_total"), retried);
  EXPECT_EQ(tracker.get("tunefarm_tracker_results_total", {{"device_key", "local-cpu"}, {"error", "OK"}}) - ok_before, 32);
  EXPECT_EQ(tracker.sum("tunefarm_tracker_agent_sessions_ended_total") - ended_before, 1);
  EXPECT_EQ(tracker.get("tunefarm_tracker_agents", {{"device_key", "local-cpu"}}), 1);
  std::cout << retried << " candidates requeued; the tracker counted "
            << tracker.sum("tunefarm_tracker_requeued_candidates_total") << "\n";

  // Every metric the Grafana dashboard plots is one the daemons serve (only a lease expiry, which
  // nothing here causes, leaves a family without a series).
  std::string exposed = http_get(tracker_port_, "/metrics").body + http_get(tunerd_port, "/metrics").body + agents_exposed;
  std::ifstream grafana(std::string(TUNEFARM_SOURCE_DIR) + "/deploy/grafana/tunefarm.json");
  std::string dashboard((std::istreambuf_iterator<char>(grafana)), std::istreambuf_iterator<char>());
  std::regex metric("tunefarm_[a-z_]+");
  int plotted = 0;
  for (auto it = std::sregex_iterator(dashboard.begin(), dashboard.end(), metric); it != std::sregex_iterator(); ++it) {
    std::string name = it->str();
    if (name == "tunefarm_tracker_lease_expirations_total") continue;
    ++plotted;
    EXPECT_NE(exposed.find("\n" + name), std::string::npos) << name << " is plotted but not served";
  }
  EXPECT_GT(plotted, 15);
}

// --- Tokens ------------------------------------------------------------------------------------

TEST(MetricsTokens, TrackerMetricsTakeTheTunerOrAReaderToken) {
  int port = free_port();
  Farm farm({"--agent-token-file", secret_file("agent-secret"), "--tuner-token-file", secret_file("tuner-secret"),
             "--reader-token-file", secret_file("reader-secret"), "--metrics-listen", port_arg(port)});
  ASSERT_TRUE(wait_for_endpoint(port)) << farm.logs();
  HttpAnswer none = http_get(port, "/metrics");
  EXPECT_EQ(none.status, 401);
  EXPECT_NE(none.body.find("tuner token or a reader token"), std::string::npos) << none.body;
  EXPECT_EQ(none.body.find("tunefarm_"), std::string::npos);
  EXPECT_EQ(http_get(port, "/metrics", "wrong").status, 401);
  EXPECT_EQ(http_get(port, "/metrics", "agent-secret").status, 401);
  EXPECT_EQ(http_get(port, "/metrics", "reader-secret").status, 200);
  HttpAnswer tuner = http_get(port, "/metrics", "tuner-secret");
  EXPECT_EQ(tuner.status, 200);
  EXPECT_EQ(tuner.header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
}

TEST(MetricsTokens, AgentMetricsTakeAMetricsToken) {
  Farm farm;
  int port = free_port();
  farm.start_agent("a1", "local-cpu", {"--metrics-listen", port_arg(port), "--metrics-token-file", secret_file("scraper")});
  ASSERT_TRUE(wait_for_endpoint(port)) << farm.logs();
  EXPECT_EQ(http_get(port, "/metrics").status, 401);
  EXPECT_EQ(http_get(port, "/metrics", "nope").status, 401);
  HttpAnswer ok = http_get(port, "/metrics", "scraper");
  EXPECT_EQ(ok.status, 200);
  EXPECT_NE(ok.body.find("tunefarm_agent_worker_restarts_total{agent_id=\"a1\",device_key=\"local-cpu\"} 0"),
            std::string::npos)
      << ok.body;
}

TEST(MetricsTokens, TunerdMetricsAndDashboardTakeTheReadOnlyToken) {
  Farm farm;
  int metrics_port = free_port(), http_port = free_port();
  Tunerd tunerd(farm, farm.log_dir() + "/data",
                {"--client-token-file", secret_file("client-secret"), "--read-only-token-file", secret_file("reader"),
                 "--metrics-listen", port_arg(metrics_port), "--http-listen", port_arg(http_port)});
  ASSERT_TRUE(wait_for_endpoint(metrics_port)) << tunerd.log();
  for (const std::string path : {"/", "/jobs/job-1", "/api/jobs", "/api/jobs/job-1/curve", "/api/devices",
                                 "/static/dashboard.js", "/static/chart.min.js", "/no/such/page"}) {
    HttpAnswer a = http_get(http_port, path);
    EXPECT_EQ(a.status, 401) << path;
    EXPECT_EQ(a.header("WWW-Authenticate").rfind("Basic", 0), 0u) << path;
    EXPECT_EQ(http_get(http_port, path, "client-secretX").status, 401) << path;
  }
  EXPECT_EQ(http_get(metrics_port, "/metrics").status, 401);
  EXPECT_EQ(http_get(metrics_port, "/metrics", "reader").status, 200);
  EXPECT_EQ(http_get(metrics_port, "/metrics", "client-secret").status, 200);
  HttpAnswer jobs = http_get(http_port, "/api/jobs", "reader");
  EXPECT_EQ(jobs.status, 200);
  EXPECT_EQ(nlohmann::json::parse(jobs.body)["jobs"].size(), 0u);
  // A browser sends the token as the password it asked for.
  httplib::Headers basic{httplib::make_basic_authentication_header("me", "reader")};
  EXPECT_EQ(http_request("GET", http_port, "/api/jobs", basic).status, 200);
  httplib::Headers wrong{httplib::make_basic_authentication_header("me", "guess")};
  EXPECT_EQ(http_request("GET", http_port, "/api/jobs", wrong).status, 401);
}

// --- Bad requests -------------------------------------------------------------------------------

TEST(DashboardRequests, BadPathsAndParametersAre4xxAndTunerdGoesOn) {
  Farm farm;
  farm.start_agent("a1");
  ASSERT_TRUE(farm.wait_for_agents("local-cpu", 1, std::chrono::seconds(20)));
  int metrics_port = free_port(), http_port = free_port();
  Tunerd tunerd(farm, farm.log_dir() + "/data",
                {"--metrics-listen", port_arg(metrics_port), "--http-listen", port_arg(http_port)});
  ASSERT_TRUE(wait_for_endpoint(metrics_port)) << tunerd.log();
  auto job = tunerd.submit("matmul:M=32,N=32,K=32", 4, 4);
  ASSERT_TRUE(job.ok());
  const std::vector<std::pair<std::string, int>> cases = {
      {"/api/jobs?limit=abc", 400},          {"/api/jobs?limit=0", 400},
      {"/api/jobs?limit=-1", 400},           {"/api/jobs?limit=99999999999999", 400},
      {"/api/jobs?state=DONE", 400},         {"/api/jobs?state=", 400},
      {"/api/jobs?state=RUNNING,,", 400},    {"/api/jobs?verbose=1", 400},
      {"/api/jobs/", 400},                   {"/api/jobs/no-such-job", 404},
      {"/api/jobs/no-such-job/curve", 404},  {"/api/jobs/..%2F..%2Fetc%2Fpasswd", 400},
      {"/api/jobs/%00", 400},                {"/api/jobs/" + std::string(65, 'a'), 400},
      {"/api/jobs/" + job->id() + "/nope", 404}, {"/api/jobs/" + job->id() + "/curve/x", 404},
      {"/api/jobs/" + job->id() + "?x=1", 400},  {"/api/devices?key=1", 400},
      {"/api/nothing", 404},                 {"/jobs/a/b", 400},
      {"/jobs/%ff%fe", 400},                 {"/static/../tunerd", 404},
      {"/static/", 404},                     {"/favicon.ico", 404},
      {"/" + std::string(20000, 'x'), 414},
  };
  for (const auto& [path, status] : cases) {
    HttpAnswer a = http_get(http_port, path);
    EXPECT_EQ(a.status, status) << path.substr(0, 80) << ": " << a.body.substr(0, 200);
    if (a.status >= 400 && a.status != 414) {
      EXPECT_NE(a.body.find("\"error\""), std::string::npos) << path.substr(0, 80);
    }
  }
  for (const std::string method : {"POST", "PUT", "DELETE"}) {
    EXPECT_EQ(http_request(method, http_port, "/api/jobs", {}, "{}").status, 405) << method;
    EXPECT_EQ(http_request(method, metrics_port, "/metrics", {}, "{}").status, 405) << method;
  }
  EXPECT_EQ(http_get(metrics_port, "/metric").status, 404);
  EXPECT_EQ(http_get(metrics_port, "/metrics/x").status, 404);
  // Still serving, the job's views answer, and the job is unharmed.
  EXPECT_EQ(http_get(http_port, "/api/jobs").status, 200);
  EXPECT_EQ(http_get(http_port, "/api/jobs/" + job->id()).status, 200);
  EXPECT_EQ(http_get(http_port, "/api/jobs/" + job->id() + "/curve").status, 200);
  EXPECT_EQ(http_get(http_port, "/api/jobs?state=running,SUCCEEDED&limit=5").status, 200);
  EXPECT_EQ(http_get(http_port, "/api/devices").status, 200);
  v1::Job done = tunerd.watch(job->id());
  EXPECT_EQ(done.state(), v1::SUCCEEDED) << done.error();
}

// --- Exposure and start-up ------------------------------------------------------------------------

// Runs `program` with `args` to its exit, stopping it with SIGTERM after `stop_after`; its exit code
// and output.
std::pair<int, std::string> run_to_exit(const std::string& program, const std::vector<std::string>& args,
                                        std::chrono::milliseconds stop_after = std::chrono::seconds(20)) {
  std::string dir = std::filesystem::path(scratch_dir()) / "metrics";
  std::filesystem::create_directories(dir);
  std::string log = dir + "/" + program + std::to_string(free_port()) + ".log";
  Process p(bin_path(program), args, log);
  for (auto until = Clock::now() + stop_after; p.running() && Clock::now() < until;)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (p.running()) p.signal(SIGTERM);
  int status = p.wait();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, p.log()};
}

TEST(MetricsExposure, BeyondLoopbackWithoutTlsAndTokensIsRefused) {
  std::string wide = fmt::format("0.0.0.0:{}", free_port());
  auto [tracker_code, tracker_log] =
      run_to_exit("trackerd", {"--listen", port_arg(free_port()), "--metrics-listen", wide});
  EXPECT_EQ(tracker_code, 2) << tracker_log;
  EXPECT_NE(tracker_log.find("--metrics-listen: refusing to serve " + wide), std::string::npos) << tracker_log;
  std::string data = std::filesystem::path(scratch_dir()) / "metrics-data";
  auto [tunerd_code, tunerd_log] =
      run_to_exit("tunerd", {"--listen", port_arg(free_port()), "--data-dir", data, "--metrics-listen", "off",
                             "--http-listen", wide});
  EXPECT_EQ(tunerd_code, 2) << tunerd_log;
  EXPECT_NE(tunerd_log.find("--http-listen: refusing to serve"), std::string::npos) << tunerd_log;
  auto [agent_code, agent_log] = run_to_exit("device-agent", {"--tracker", port_arg(free_port()), "--metrics-listen", wide});
  EXPECT_EQ(agent_code, 2) << agent_log;
  EXPECT_NE(agent_log.find("--metrics-token"), std::string::npos) << agent_log;
  std::filesystem::remove_all(data);
}

TEST(MetricsExposure, ATakenMetricsPortIsAddressAlreadyInUse) {
  int port = free_port();
  Farm farm({"--metrics-listen", port_arg(port)});
  ASSERT_TRUE(wait_for_endpoint(port));
  auto [code, log] = run_to_exit("trackerd", {"--listen", port_arg(free_port()), "--metrics-listen", port_arg(port)});
  EXPECT_EQ(code, 1) << log;
  EXPECT_NE(log.find("address already in use"), std::string::npos) << log;
}

// The agents' "auto" metrics ports are none that trackerd's or tunerd's "auto" takes on the default
// ports or the hundred after them: a second tunerd on 9192 once found 9392 taken by an agent.
TEST(MetricsExposure, TheAgentsAutoPortsAreApartFromTheDaemonsAutoPorts) {
  for (int listen = 9190; listen < 9300; ++listen) {
    auto metrics = resolve_metrics_listen(kMetricsBesideListen, fmt::format("127.0.0.1:{}", listen));
    ASSERT_TRUE(metrics.ok()) << metrics.status().to_string();
    int port = std::stoi(metrics->substr(metrics->rfind(':') + 1));
    EXPECT_TRUE(port < kFirstAgentMetricsPort || port >= kFirstAgentMetricsPort + kAgentMetricsPorts)
        << "a daemon on " << listen << " takes " << port;
  }
}

// Two agents on one host with the default --metrics-listen (auto; the harness turns metrics off
// unless asked): both start, each serves its own metrics on a port of its own from 9500 up, and
// says which in its log, where one fixed port stopped the second with "address already in use".
TEST(MetricsExposure, TwoAgentsOnOneHostEachServeTheirOwnMetrics) {
  Process help(bin_path("device-agent"), {"--help"}, ::testing::TempDir() + "/agent-help.log");
  help.wait();
  EXPECT_NE(help.log().find("--metrics-listen TEXT=auto"), std::string::npos) << help.log();
  Farm farm;
  farm.start_agent("a1", "local-cpu", {"--metrics-listen", "auto"});
  farm.start_agent("a2", "other-key", {"--metrics-listen", "auto"});
  ASSERT_TRUE(farm.wait_for_agents("local-cpu", 1, std::chrono::seconds(20))) << farm.logs();
  ASSERT_TRUE(farm.wait_for_agents("other-key", 1, std::chrono::seconds(20))) << farm.logs();
  std::set<int> ports;
  for (const std::string id : {"a1", "a2"}) {
    std::smatch m;
    std::string log = farm.agent(id).log();
    ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(metrics on http://127\.0\.0\.1:(\d+)/metrics)"))) << log;
    int port = std::stoi(m[1]);
    EXPECT_GE(port, kFirstAgentMetricsPort);
    EXPECT_LT(port, kFirstAgentMetricsPort + kAgentMetricsPorts);
    ports.insert(port);
    HttpAnswer scraped = http_get(port, "/metrics");
    EXPECT_EQ(scraped.status, 200);
    EXPECT_NE(scraped.body.find(fmt::format("agent_id=\"{}\"", id)), std::string::npos) << scraped.body;
    EXPECT_TRUE(farm.agent(id).running()) << log;
  }
  EXPECT_EQ(ports.size(), 2u);
}

TEST(JsonLogs, EveryLineOfADaemonsLogIsOneJsonObject) {
  auto [code, log] = run_to_exit("trackerd", {"--listen", port_arg(free_port()), "--metrics-listen", "off",
                                              "--log-format", "json", "--log-level", "debug", "--drain-timeout-s", "0"},
                                  std::chrono::milliseconds(1500));
  ASSERT_EQ(code, 0) << log;
  std::istringstream in(log);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    EXPECT_EQ(j["program"], "trackerd");
    EXPECT_TRUE(j["msg"].is_string());
    EXPECT_TRUE(j["level"].is_string());
    EXPECT_EQ(j["ts"].get<std::string>().back(), 'Z');
    ++lines;
  }
  EXPECT_GE(lines, 2);  // "listening on ...", "stopped"
}

}  // namespace
}  // namespace tunefarm::testing
