// tunerd as a program: its flags and the wiring of the history, the job manager, the tracker
// backend and the gRPC service, so that tunerd_main.cc only parses and runs. The exposure rule,
// signals, listening and the data-directory lock are common/daemon/daemon.h's.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "common/wire/credentials.h"
#include "common/daemon/daemon.h"
#include "tuner/job_manager.h"
#include "tuner/service.h"

namespace tunefarm {

struct TunerdFlags {
  std::string listen = "127.0.0.1:9191";
  std::string metrics_listen;
  std::string http_listen;  // The dashboard; empty: off.
  std::string chart_js;     // Chart.js for the dashboard's charts.
  std::string tracker = "127.0.0.1:9190";
  std::string data_dir = "tunefarm-data";
  std::string history;  // A postgresql:// URL shared with other tunerds; empty: history.db in data_dir.
  double lease_s = 30;  // How long a job's lease lasts unrenewed, in a shared history.
  std::string copy_history;  // A SQLite history to copy into --history, instead of serving.
  std::string tracker_token;
  bool insecure = false;
  AccessTokens tokens;
  JobManagerOptions jobs;
  std::string features = "knob";
  std::string objective = "rank";
  std::string check_history = "quick";
  std::string salvage;  // A damaged history to copy into --data-dir, instead of serving.
  TlsServerFiles tls;
  TlsClientFiles tracker_tls;
};

void add_tunerd_flags(CLI::App& app, TunerdFlags& flags);

// Serves until SIGTERM or SIGINT; running jobs resume at the next start.
DaemonExit run_tunerd(TunerdFlags flags);

}  // namespace tunefarm
