// A daemon's Prometheus metrics: the families live in a prometheus-cpp registry (Debian's
// prometheus-cpp core), each component increments its counters where its events happen, and
// MetricsEndpoint serves the registry in Prometheus' text format on an address of its own
// (--metrics-listen), under the same exposure rule as the daemon's gRPC port: loopback, or TLS and
// tokens, or --insecure. prometheus-cpp's own pull exposer is not used: it cannot serve TLS here.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <prometheus/registry.h>

#include "common/wire/credentials.h"
#include "common/status.h"

namespace tunefarm {

class HttpServer;

// "--metrics-listen off" turns the endpoint off.
inline constexpr const char* kMetricsOff = "off";

struct MetricsEndpointOptions {
  std::string listen;       // As --metrics-listen takes it: host:port, a port (loopback), or "off".
  TlsServerFiles tls;       // cert and key; a client CA is not asked of scrapers.
  std::vector<std::string> tokens;  // Any of them may scrape; empty: no token is asked for.
  bool insecure = false;
  std::string tls_flags;    // For the refusal's message, as Exposure has them.
  std::string token_flags;
  std::string token_hint;   // Which token to present, for the 401 answer.
};

// --metrics-listen's value for "beside --listen": the daemon's own host with its port + 200
// (trackerd's 9190 -> 9390, tunerd's 9191 -> 9391), so that a second daemon of a kind on one host,
// on another port, gets metrics of its own instead of failing to start.
inline constexpr const char* kMetricsBesideListen = "auto";

// Adds --metrics-listen (environment TUNEFARM_METRICS_LISTEN) with `default_listen`; `auto_means`
// says in its help what kMetricsBesideListen stands for in this program.
void add_metrics_listen_flag(CLI::App& app, std::string& listen, const std::string& default_listen,
                             const std::string& auto_means = "the --listen host, its port + 200");

// The address `metrics_listen` stands for, given the daemon's `listen` address: kMetricsBesideListen
// becomes the port beside `listen`; anything else is itself. INVALID_ARGUMENT when `listen` has no
// port that leaves room.
StatusOr<std::string> resolve_metrics_listen(const std::string& metrics_listen, const std::string& listen);

// Histogram buckets for durations from a millisecond to a few minutes.
std::vector<double> duration_buckets();

// Prometheus' text format of everything in `registry`.
std::string render_metrics(prometheus::Registry& registry);

class MetricsEndpoint {
 public:
  // Checks the exposure rule (a configuration error names the missing flags) and serves
  // GET /metrics; `before_scrape` (may be null) runs first on every scrape, to set the gauges
  // that sample state. Null when `listen` is "off".
  static StatusOr<std::unique_ptr<MetricsEndpoint>> start(const MetricsEndpointOptions& options,
                                                          std::shared_ptr<prometheus::Registry> registry,
                                                          std::function<void()> before_scrape = nullptr);
  ~MetricsEndpoint();
  const std::string& address() const;

 private:
  MetricsEndpoint() = default;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<HttpServer> server_;
};

}  // namespace tunefarm
