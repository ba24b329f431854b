// trackerd as a program: its flags and the wiring of the broker, its clock and the gRPC service,
// so that trackerd_main.cc only parses and runs. The exposure rule, signals and listening are
// common/daemon/daemon.h's.
#pragma once

#include <CLI/CLI.hpp>

#include "common/wire/credentials.h"
#include "common/daemon/daemon.h"
#include "tracker/broker.h"

namespace tunefarm {

struct TrackerdFlags {
  std::string listen = "127.0.0.1:9190";
  std::string metrics_listen;
  BrokerOptions broker;
  int heartbeat_timeout_ms = static_cast<int>(BrokerOptions{}.heartbeat_timeout.count());
  int no_agent_timeout_s = 30;
  double drain_timeout_s = 30;
  bool insecure = false;
  TlsServerFiles tls;
};

void add_trackerd_flags(CLI::App& app, TrackerdFlags& flags);

// Serves until SIGTERM or SIGINT, then lets leased work finish for up to the drain timeout and
// fails what is left.
DaemonExit run_trackerd(TrackerdFlags flags);

}  // namespace tunefarm
