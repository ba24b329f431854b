// tunerd: the tuning service (see tuner/job_manager.h and tuner/service.h).
//   tunerd --listen 127.0.0.1:9191 --tracker 127.0.0.1:9190 --data-dir DIR
#include <filesystem>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "common/credentials.h"
#include "common/daemon.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/temp_dir.h"
#include "tuner/compiler_task.h"
#include "tuner/service.h"
#include "tuner/tracker_backend.h"

int main(int argc, char** argv) {
  using namespace tunefarm;
  CLI::App app{"tunerd: runs tuning jobs, measures on the farm through the tracker, keeps the history"};
  CommonFlags common;
  add_common_flags(app, common, true);
  std::string listen = "127.0.0.1:9191";
  std::string tracker = "127.0.0.1:9190";
  std::string data_dir = "tunefarm-data";
  std::string tracker_token;
  bool insecure = false;
  AccessTokens tokens;
  JobManagerOptions options;
  app.add_option("--listen", listen, "Address to serve on")->capture_default_str();
  app.add_option("--tracker", tracker, "The tracker's address")->capture_default_str();
  app.add_option("--data-dir", data_dir, "Directory of the history database (created if missing)")->capture_default_str();
  add_secret_option(app, "tracker-token", tracker_token, "TUNEFARM_TRACKER_TOKEN",
                    "Token to present to the tracker with each batch");
  add_secret_option(app, "client-token", tokens.client, "TUNEFARM_CLIENT_TOKEN",
                    "Token that may submit, cancel and import (repeatable)");
  add_secret_option(app, "read-only-token", tokens.read_only, "TUNEFARM_READ_ONLY_TOKEN",
                    "Token that may only query jobs and records (repeatable)");
  app.add_option("--max-jobs", options.max_running_jobs, "Jobs that run at once; more wait in the queue")
      ->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--max-queued-jobs", options.max_queued_jobs, "Jobs that may wait to run; more are refused")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--build-threads", options.build_threads, "Compiler threads per job (0: one per CPU)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  std::string features = "knob";
  app.add_option("--features", features,
                 "What the cost model sees of a candidate: knob (its knob values) or loop (its loop nest; "
                 "slower to plan)")
      ->capture_default_str()->check(CLI::IsMember({"loop", "knob"}));
  std::string objective = "rank";
  app.add_option("--cost-model", objective,
                 "How the cost model learns: rank (pairwise ranking, as AutoTVM) or regression (of normalised "
                 "throughput)")
      ->capture_default_str()->check(CLI::IsMember({"rank", "regression"}));
  std::string check_history = "quick";
  app.add_option("--check-history", check_history,
                 "How the history database is checked at start: quick (every page) or full (indexes too; slower)")
      ->capture_default_str()->check(CLI::IsMember({"quick", "full"}));
  TlsServerFiles tls;
  TlsClientFiles tracker_tls;
  app.add_option("--tls-cert", tls.cert, "PEM certificate to serve TLS with (see deploy/make-certs.sh)");
  app.add_option("--tls-key", tls.key, "PEM private key of --tls-cert");
  app.add_option("--tracker-ca", tracker_tls.ca, "PEM CA to check a TLS tracker by (dials plaintext without)");
  app.add_option("--tracker-cert", tracker_tls.cert, "PEM client certificate for a tracker that requires one");
  app.add_option("--tracker-key", tracker_tls.key, "PEM private key of --tracker-cert");
  app.add_flag("--insecure", insecure, "Allow a non-loopback address without TLS and tokens");
  int exit_code = 0;
  if (!parse_command_line(app, argc, argv, exit_code)) return exit_code;
  options.model.objective = *parse_objective(objective);
  if (Status s = setup_logging("tunerd", common.log_level); !s.ok()) {
    fmt::print(stderr, "tunerd: {}\n", s.message());
    return 2;
  }
  Exposure exposure{listen, tls.enabled(), !tokens.open(), insecure, "--tls-cert, --tls-key", "--client-token",
                    "whoever can reach it may submit jobs and read the history"};
  if (Status s = check_exposure(exposure); !s.ok()) {
    fmt::print(stderr, "tunerd: {}\n", s.message());
    return 2;
  }
  auto credentials = server_credentials(tls);
  auto tracker_credentials = channel_credentials(tracker_tls);
  for (const Status& s : {credentials.status(), tracker_credentials.status()}) {
    if (!s.ok()) {
      fmt::print(stderr, "tunerd: {}\n", s.message());
      return 2;
    }
  }

  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    fmt::print(stderr, "tunerd: cannot create data directory {}: {}\n", data_dir, ec.message());
    return 1;
  }
  options.build_mark_dir = data_dir;
  auto lock = DirectoryLock::acquire(data_dir);
  if (!lock.ok()) {
    fmt::print(stderr, "tunerd: {}\n", lock.status().message());
    return 1;
  }
  // Link directories of a tunerd that was killed mid-build.
  remove_stale_temp_dirs("", "tunefarm-link");
  RecordStoreOptions store_options;
  store_options.check = check_history == "full" ? RecordStoreOptions::Check::kFull : RecordStoreOptions::Check::kQuick;
  auto store = RecordStore::open((std::filesystem::path(data_dir) / "history.db").string(), store_options);
  if (!store.ok()) {
    fmt::print(stderr, "tunerd: {}\n", store.status().message());
    return 1;
  }

  StopSignals signals;

  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(64 << 20);
  channel_args.SetMaxSendMessageSize(256 << 20);
  auto tracker_channel = grpc::CreateCustomChannel(tracker, *tracker_credentials, channel_args);
  CompilerTaskFactory tasks(*parse_feature_kind(features));
  JobManager jobs(
      **store, tasks,
      [&](const v1::Job& job) -> StatusOr<std::unique_ptr<MeasureBackend>> {
        TrackerBackendOptions o;
        o.token = tracker_token;
        o.device_key = job.spec().device_key();
        o.job_id = job.id();
        o.priority = job.spec().priority();
        return std::unique_ptr<MeasureBackend>(std::make_unique<TrackerMeasureBackend>(tracker_channel, o));
      },
      [&](const std::string& key) { return check_device_key(tracker_channel, key, tracker_token); }, options);

  TunerService service(jobs, **store, tokens);
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.RegisterService(&service);
  auto server = start_server(builder, listen, *credentials);
  if (!server.ok()) {
    fmt::print(stderr, "tunerd: {}\n", server.status().message());
    return 1;
  }
  if (Status s = jobs.start(); !s.ok()) {
    fmt::print(stderr, "tunerd: cannot resume jobs: {}\n", s.message());
    return 1;
  }
  spdlog::info("listening on {}; history in {}; tracker at {}", listen, (*store)->path(), tracker);

  int sig = signals.wait();
  spdlog::info("signal {}: stopping (running jobs resume at the next start)", sig);
  service.stop_watches();
  jobs.shutdown();
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (Status s = (*store)->flush(); !s.ok()) spdlog::error("history: {}", s.message());
  spdlog::info("stopped");
  return 0;
}
