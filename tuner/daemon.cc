#include "tuner/daemon.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "common/flags.h"
#include "common/http/http_server.h"
#include "common/http/metrics.h"
#include "common/temp_dir.h"
#include "db/copy_history.h"
#include "db/postgres.h"
#include "db/salvage.h"
#include "tuner/compiler_task.h"
#include "tuner/dashboard.h"
#include "tuner/metrics.h"
#include "tuner/tracker_backend.h"

namespace tunefarm {

void add_tunerd_flags(CLI::App& app, TunerdFlags& f) {
  app.add_option("--listen", f.listen, "Address to serve on")->capture_default_str();
  add_metrics_listen_flag(app, f.metrics_listen, kMetricsBesideListen);
  app.add_option("--http-listen", f.http_listen,
                 "Address of the web dashboard (jobs, tuning curves, the farm; JSON under /api/): host:port or a port "
                 "(on 127.0.0.1); off when not given. Beyond loopback it needs TLS and tokens, as tunerd does");
  f.chart_js = TUNEFARM_CHARTJS_FILE;
  app.add_option("--chart-js", f.chart_js, "Chart.js file the dashboard draws its charts with (Debian's libjs-chart.js)")
      ->capture_default_str();
  app.add_option("--tracker", f.tracker, "The tracker's address")->capture_default_str();
  app.add_option("--data-dir", f.data_dir, "Directory of the history database (created if missing)")
      ->capture_default_str();
  app.add_option("--history", f.history,
                 "A PostgreSQL history shared by several tunerds, as a postgresql:// URL without a password (libpq "
                 "reads it from ~/.pgpass, PGPASSFILE or PGPASSWORD); unset: history.db in --data-dir");
  app.add_option("--lease-s", f.lease_s,
                 "With --history: how long a job's lease lasts unrenewed, so how soon another tunerd takes over the "
                 "jobs of one that died (renewed every quarter of it)")
      ->capture_default_str()->check(CLI::Range(1.0, 3600.0));
  app.add_option("--copy-history", f.copy_history,
                 "Copy this SQLite history file (records and jobs) into --history, then exit; copying again skips "
                 "what is there");
  add_secret_option(app, "tracker-token", f.tracker_token, "TUNEFARM_TRACKER_TOKEN",
                    "Token to present to the tracker with each batch");
  add_secret_option(app, "client-token", f.tokens.client, "TUNEFARM_CLIENT_TOKEN",
                    "Token that may submit, cancel and import (repeatable)");
  add_secret_option(app, "read-only-token", f.tokens.read_only, "TUNEFARM_READ_ONLY_TOKEN",
                    "Token that may only query jobs and records (repeatable)");
  app.add_option("--max-jobs", f.jobs.max_running_jobs, "Jobs that run at once; more wait in the queue")
      ->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--max-queued-jobs", f.jobs.max_queued_jobs, "Jobs that may wait to run; more are refused")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--max-queued-jobs-per-client", f.jobs.max_queued_jobs_per_client,
                 "Jobs that one client token may have waiting; more are refused (with tokens off, only "
                 "--max-queued-jobs applies)")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--max-wait-s", f.jobs.max_wait_s,
                 "How long a job waits for the tracker and an agent of its key (a tracker restart, a farm "
                 "without boards) before it fails, unless it says (submit --max-wait); a job failed so can be "
                 "resumed")
      ->capture_default_str()->check(CLI::Range(1.0, 30.0 * 24 * 3600));
  app.add_option("--build-threads", f.jobs.build_threads, "Compiler threads per job (0: one per CPU)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--features", f.features,
                 "What the cost model sees of a candidate: knob (its knob values) or loop (its loop nest; "
                 "slower to plan)")
      ->capture_default_str()->check(CLI::IsMember({"loop", "knob"}));
  app.add_option("--cost-model", f.objective,
                 "How the cost model learns: rank (pairwise ranking, as AutoTVM) or regression (of normalised "
                 "throughput)")
      ->capture_default_str()->check(CLI::IsMember({"rank", "regression"}));
  app.add_option("--check-history", f.check_history,
                 "How the history database is checked at start: quick (every page) or full (indexes too; slower)")
      ->capture_default_str()->check(CLI::IsMember({"quick", "full"}));
  app.add_option("--salvage", f.salvage,
                 "Copy every readable record of this damaged history file into a new history in --data-dir "
                 "(which must hold none), then exit; the damaged file is only read");
  app.add_option("--tls-cert", f.tls.cert, "PEM certificate to serve TLS with (see deploy/make-certs.sh)");
  app.add_option("--tls-key", f.tls.key, "PEM private key of --tls-cert");
  app.add_option("--tracker-ca", f.tracker_tls.ca, "PEM CA to check a TLS tracker by (dials plaintext without)");
  app.add_option("--tracker-cert", f.tracker_tls.cert, "PEM client certificate for a tracker that requires one");
  app.add_option("--tracker-key", f.tracker_tls.key, "PEM private key of --tracker-cert");
  app.add_flag("--insecure", f.insecure, "Allow a non-loopback address without TLS and tokens");
}

namespace {

// The data directory, owned by this process, and the history in it.
struct History {
  std::unique_ptr<DirectoryLock> lock;
  std::unique_ptr<db::RecordStore> store;
};

StatusOr<History> open_history(const TunerdFlags& f, const std::shared_ptr<TunerMetrics>& metrics) {
  std::error_code ec;
  std::filesystem::create_directories(f.data_dir, ec);
  if (ec) return unavailable(fmt::format("cannot create data directory {}: {}", f.data_dir, ec.message()));
  History history;
  TF_ASSIGN_OR_RETURN(history.lock, DirectoryLock::acquire(f.data_dir));
  // Link directories of a tunerd that was killed mid-build.
  remove_stale_temp_dirs("", "tunefarm-link");
  db::RecordStoreOptions options;
  options.check = f.check_history == "full" ? db::RecordStoreOptions::Check::kFull : db::RecordStoreOptions::Check::kQuick;
  options.on_commit = [metrics](double seconds, size_t writes, bool committed) {
    metrics->history_write(seconds, writes, committed);
  };
  // A shared history that stays silent for a lease has cost this tunerd its leases anyway; waiting
  // on longer would hold its heartbeat, and its shutdown, behind a hung connection.
  options.reply_timeout = std::max(f.jobs.lease, std::chrono::milliseconds(1000));
  std::string location = f.history.empty() ? (std::filesystem::path(f.data_dir) / "history.db").string() : f.history;
  TF_ASSIGN_OR_RETURN(history.store, db::RecordStore::open(location, options));
  return history;
}

// The dashboard's charts; without the file the dashboard still serves its tables and JSON.
std::string read_chart_js(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  if (in) text << in.rdbuf();
  if (text.str().empty())
    spdlog::warn("cannot read Chart.js from {} (apt-get install libjs-chart.js, or --chart-js FILE): the dashboard "
                 "shows no charts",
                 path);
  return text.str();
}

std::shared_ptr<grpc::Channel> tracker_channel(const TunerdFlags& f,
                                               const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  // gRPC's own reconnect backoff grows to minutes: a restarted tracker must get its jobs' batches
  // again in seconds, as it gets its agents back (device_agent/agent.cc).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  return grpc::CreateCustomChannel(f.tracker, credentials, args);
}

}  // namespace

namespace {

DaemonExit salvage(const TunerdFlags& f) {
  std::error_code ec;
  std::filesystem::create_directories(f.data_dir, ec);
  if (ec) return DaemonExit::environment(unavailable(fmt::format("cannot create {}: {}", f.data_dir, ec.message())));
  auto lock = DirectoryLock::acquire(f.data_dir);
  if (!lock.ok()) return DaemonExit::environment(lock.status());
  std::string out = (std::filesystem::path(f.data_dir) / "history.db").string();
  auto report = db::salvage_history(f.salvage, out);
  if (!report.ok()) return DaemonExit::of(report.status().with_context("--salvage"));
  spdlog::info("salvaged {} records and {} jobs of {} into {} ({} rows could not be read); start tunerd with "
               "--data-dir {}",
               report->records, report->jobs, f.salvage, out, report->unreadable, f.data_dir);
  fmt::print("salvaged {} records and {} jobs into {} ({} unreadable rows left behind)\n", report->records,
             report->jobs, out, report->unreadable);
  return DaemonExit::ok();
}

DaemonExit copy_history(const TunerdFlags& f) {
  if (f.history.empty())
    return DaemonExit::configuration(invalid_argument("--copy-history copies into --history: give its postgresql:// URL"));
  std::error_code ec;
  if (!std::filesystem::is_regular_file(f.copy_history, ec))
    return DaemonExit::configuration(not_found(fmt::format("--copy-history {}: no such history file", f.copy_history)));
  auto from = db::RecordStore::open(f.copy_history);
  if (!from.ok()) return DaemonExit::environment(from.status().with_context("--copy-history"));
  auto to = db::RecordStore::open(f.history);
  if (!to.ok()) return DaemonExit::environment(to.status().with_context("--history"));
  auto report = db::copy_history(**from, **to);
  if (!report.ok()) return DaemonExit::of(report.status().with_context("--copy-history"));
  fmt::print("copied {} records ({} were there) and {} jobs ({} were there) into {}\n", report->records,
             report->records_skipped, report->jobs, report->jobs_skipped, f.history);
  return DaemonExit::ok();
}

}  // namespace

DaemonExit run_tunerd(TunerdFlags f) {
  if (!f.salvage.empty()) return salvage(f);
  if (!f.history.empty()) {
    if (!db::is_postgres_url(f.history))
      return DaemonExit::configuration(invalid_argument(fmt::format(
          "--history {}: give a postgresql:// URL; a SQLite history lives in --data-dir", f.history)));
    if (Status s = db::check_postgres_url(f.history); !s.ok()) return DaemonExit::configuration(s.with_context("--history"));
  }
  if (!f.copy_history.empty()) return copy_history(f);
  Exposure exposure{f.listen, f.tls.enabled(), !f.tokens.open(), f.insecure, "--tls-cert, --tls-key", "--client-token-file",
                    "whoever can reach it may submit jobs and read the history"};
  auto credentials = serving_credentials(exposure, f.tls, f.tokens.gate());
  if (!credentials.ok()) return DaemonExit::configuration(credentials.status());
  auto tracker_credentials = channel_credentials(f.tracker_tls);
  if (!tracker_credentials.ok()) return DaemonExit::configuration(tracker_credentials.status());
  auto metrics_listen = resolve_metrics_listen(f.metrics_listen, f.listen);
  if (!metrics_listen.ok()) return DaemonExit::configuration(metrics_listen.status());
  f.jobs.model.objective = *parse_objective(f.objective);
  f.jobs.build_mark_dir = f.data_dir;
  f.jobs.lease = std::chrono::milliseconds(static_cast<int64_t>(f.lease_s * 1000));
  auto registry = std::make_shared<prometheus::Registry>();
  f.jobs.metrics = std::make_shared<TunerMetrics>(*registry);
  auto history = open_history(f, f.jobs.metrics);
  if (!history.ok()) return DaemonExit::environment(history.status());
  db::RecordStore& store = *history->store;

  StopSignals signals;
  auto tracker = tracker_channel(f, *tracker_credentials);
  CompilerTaskFactory tasks(*parse_feature_kind(f.features));
  JobManager jobs(
      store, tasks,
      [&](const v1::Job& job) -> StatusOr<std::unique_ptr<MeasureBackend>> {
        TrackerBackendOptions o;
        o.token = f.tracker_token;
        o.device_key = job.spec().device_key();
        o.job_id = job.id();
        o.priority = job.spec().priority();
        o.tracker_address = f.tracker;
        o.retry_budget = std::chrono::milliseconds(static_cast<int64_t>(1000 * max_wait_s(job.spec(), f.jobs)));
        return std::unique_ptr<MeasureBackend>(std::make_unique<TrackerMeasureBackend>(tracker, o));
      },
      [&](const std::string& key) { return check_device_key(tracker, key, f.tracker_token); }, f.jobs);
  TunerService service(jobs, store, f.tokens);
  std::string http_listen;
  if (!f.http_listen.empty() && f.http_listen != "off") {
    http_listen = normalize_listen_address(f.http_listen);
    Exposure http_exposure{http_listen, f.tls.enabled(), !f.tokens.open(), f.insecure, "--tls-cert, --tls-key",
                           "--client-token-file or --read-only-token-file", "whoever can reach it may read the jobs and the farm"};
    if (Status s = check_exposure(http_exposure); !s.ok()) return DaemonExit::configuration(s.with_context("--http-listen"));
  }
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.RegisterService(&service);
  // The service's address first: a second tunerd started on a taken --listen says so, rather
  // than that the metrics port beside it is taken (by the first tunerd's metrics).
  auto server = start_server(builder, f.listen, *credentials);
  if (!server.ok()) return DaemonExit::environment(server.status());
  // What fails past this point stops the server it started.
  auto stop_server = [&](DaemonExit exit) {
    (*server)->Shutdown(std::chrono::system_clock::now());
    return exit;
  };
  // The read-only token suffices for the metrics and the dashboard: both only show.
  std::vector<std::string> readers = f.tokens.gate().tokens;
  auto metrics = MetricsEndpoint::start({*metrics_listen, f.tls, readers, f.insecure, "--tls-cert, --tls-key",
                                         "--client-token-file or --read-only-token-file", "a client or read-only token"},
                                        registry, [&store, m = f.jobs.metrics] {
                                          if (auto counts = store.count_jobs_by_state(); counts.ok()) m->sample_jobs(*counts);
                                        });
  if (!metrics.ok()) return stop_server(DaemonExit::of(metrics.status()));
  std::unique_ptr<HttpServer> dashboard;
  if (!http_listen.empty()) {
    HttpServerOptions http{http_listen, f.tls.cert, f.tls.key, readers, "a client or read-only token (as the password)",
                           "dashboard"};
    auto farm = [tracker, token = f.tracker_token] { return farm_status(tracker, token); };
    auto started = HttpServer::start(http, dashboard_routes(jobs, store, farm, read_chart_js(f.chart_js)));
    if (!started.ok()) return stop_server(DaemonExit::of(started.status()));
    dashboard = std::move(*started);
    spdlog::info("dashboard on {}://{}/", f.tls.enabled() ? "https" : "http", dashboard->address());
  }
  if (Status s = jobs.start(); !s.ok()) return DaemonExit::environment(s.with_context("cannot resume jobs"));
  spdlog::info("listening on {}; history in {}; tracker at {}", f.listen, store.path(), f.tracker);

  int sig = signals.wait();
  spdlog::info("signal {}: stopping (running jobs resume at the next start)", sig);
  service.stop_watches();
  dashboard.reset();
  jobs.shutdown();
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  // flush() waits out an outage; a shared history's jobs go on elsewhere, and what this tunerd
  // could not write is measured again by the tunerd that takes them, so it stops without waiting
  // (the store's last try says what was lost).
  if (Status outage = store.write_outage(); store.shared() && !outage.ok())
    spdlog::error("history: {}; stopping without waiting for it", outage.message());
  else if (Status s = store.flush(); !s.ok())
    spdlog::error("history: {}", s.message());
  spdlog::info("stopped");
  return DaemonExit::ok();
}

}  // namespace tunefarm
