// device-agent as a program: its flags and the wiring of the sandboxed Measurer and the session
// with the tracker, so that agent_main.cc only parses and runs. Signals are common/daemon/daemon.h's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/wire/credentials.h"
#include "common/daemon/daemon.h"
#include "device_agent/agent.h"
#include "device_agent/metrics.h"
#include "measure/measure.h"

namespace tunefarm {

struct AgentFlags {
  AgentOptions agent;
  MeasurerOptions measurer;
  TlsClientFiles tls;
  int64_t memory_limit_mb = -1;  // -1: the default of add_agent_flags' help
  uint64_t max_artifact_mb = kDefaultMaxArtifactBytes >> 20;
  std::shared_ptr<AgentMetricsFlags> metrics;
  // The CPU the hello names, instead of the one detected (common/cpu_detect.h).
  std::string cpu;
  std::string cpu_features;
  bool cpu_features_given = false;
  std::vector<std::string> sandbox_without;  // --sandbox-without layer names
};

void add_agent_flags(CLI::App& app, AgentFlags& flags);

// Serves the tracker until SIGTERM or SIGINT, or until the tracker refuses this agent for good.
DaemonExit run_device_agent(AgentFlags flags);

}  // namespace tunefarm
