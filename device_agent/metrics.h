// device-agent's Prometheus metrics: each measurement by its outcome, how long it took, and the
// sandbox workers killed by a crash or a timeout (every candidate has a fresh one). Every metric carries the agent's id and device key.
//
// metrics.cc serves them (--metrics-listen and its TLS and token flags). A build without
// prometheus-cpp links metrics_off.cc instead, which adds no flags and serves nothing: the aarch64
// cross build, since Debian's arm64 prometheus-cpp-dev cannot be installed beside the amd64 one.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "common/status.h"
#include "tunefarm/v1/common.pb.h"

namespace tunefarm {

class AgentMetrics {
 public:
  virtual ~AgentMetrics() = default;
  // One candidate measured; `worker_starts` is 1 when a crash or a timeout killed its worker.
  virtual void measured(const v1::MeasureResult& result, double seconds, int worker_starts) = 0;
};

// Where "--metrics-listen auto" starts looking, and how many ports it tries. Apart from the ports
// that trackerd's and tunerd's own "auto" takes (their --listen port + 200: 9390, 9391, and 9392 on
// for more tunerds on the ports after 9191, up to 9499 for one on 9299), so that a second tunerd
// started on a host whose agents took their ports first does not find its metrics port taken.
inline constexpr int kFirstAgentMetricsPort = 9500;
inline constexpr int kAgentMetricsPorts = 16;

// The metrics flags' values; empty in a build without metrics.
struct AgentMetricsFlags;

// Adds the metrics flags to `app`; the returned values are filled in when it parses.
std::shared_ptr<AgentMetricsFlags> add_agent_metrics_flags(CLI::App& app);

// Starts serving the metrics as `flags` say. Null when they are off (or not built); a
// configuration error (a non-loopback address without TLS and a token) names the missing flags.
StatusOr<std::unique_ptr<AgentMetrics>> start_agent_metrics(const AgentMetricsFlags& flags, const std::string& agent_id,
                                                           const std::string& device_key);

}  // namespace tunefarm
