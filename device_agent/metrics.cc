#include "device_agent/metrics.h"

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/flags.h"
#include "common/http/metrics.h"

namespace tunefarm {

struct AgentMetricsFlags {
  std::string listen;
  TlsServerFiles tls;
  std::vector<std::string> tokens;
  bool insecure = false;
};

namespace {

using prometheus::BuildCounter;
using prometheus::BuildHistogram;

class PrometheusAgentMetrics : public AgentMetrics {
 public:
  PrometheusAgentMetrics(std::shared_ptr<prometheus::Registry> registry, const std::string& agent_id,
                         const std::string& device_key)
      : registry_(std::move(registry)),
        measurements_(BuildCounter()
                          .Name("tunefarm_agent_measurements_total")
                          .Help("Candidates measured, by outcome (error code; OK for a good measurement)")
                          .Labels({{"agent_id", agent_id}, {"device_key", device_key}})
                          .Register(*registry_)),
        errors_(BuildCounter()
                    .Name("tunefarm_agent_errors_total")
                    .Help("Candidates that came back with an error, by error code")
                    .Labels({{"agent_id", agent_id}, {"device_key", device_key}})
                    .Register(*registry_)),
        measure_seconds_(BuildHistogram()
                             .Name("tunefarm_agent_measure_seconds")
                             .Help("Time to measure one candidate (load, check, time), reference included")
                             .Labels({{"agent_id", agent_id}, {"device_key", device_key}})
                             .Register(*registry_)
                             .Add({}, duration_buckets())),
        worker_restarts_(BuildCounter()
                             .Name("tunefarm_agent_worker_restarts_total")
                             .Help("Sandbox worker processes killed by a crash, a timeout or a runtime error "
                                   "(every candidate has a fresh one)")
                             .Labels({{"agent_id", agent_id}, {"device_key", device_key}})
                             .Register(*registry_)
                             .Add({})) {}

  void measured(const v1::MeasureResult& result, double seconds, int worker_starts) override {
    std::string code = v1::ErrorCode_Name(result.error());
    measurements_.Add({{"error", code}}).Increment();
    if (result.error() != v1::OK) errors_.Add({{"error", code}}).Increment();
    measure_seconds_.Observe(seconds);
    if (worker_starts > 0) worker_restarts_.Increment(worker_starts);
  }

  std::unique_ptr<MetricsEndpoint> endpoint;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& measurements_;
  prometheus::Family<prometheus::Counter>& errors_;
  prometheus::Histogram& measure_seconds_;
  prometheus::Counter& worker_restarts_;
};

}  // namespace

std::shared_ptr<AgentMetricsFlags> add_agent_metrics_flags(CLI::App& app) {
  auto f = std::make_shared<AgentMetricsFlags>();
  add_metrics_listen_flag(app, f->listen, kMetricsBesideListen,
                          fmt::format("127.0.0.1:{}, or the first free port of the {} above it when another agent "
                                      "on this host has it",
                                      kFirstAgentMetricsPort, kAgentMetricsPorts - 1));
  app.add_option("--metrics-tls-cert", f->tls.cert, "PEM certificate to serve the metrics over TLS with");
  app.add_option("--metrics-tls-key", f->tls.key, "PEM private key of --metrics-tls-cert");
  add_secret_option(app, "metrics-token", f->tokens, "TUNEFARM_METRICS_TOKEN",
                    "Token a scraper must present to read the metrics (repeatable)");
  app.add_flag("--insecure", f->insecure, "Allow a non-loopback --metrics-listen without TLS and a metrics token");
  return f;
}

StatusOr<std::unique_ptr<AgentMetrics>> start_agent_metrics(const AgentMetricsFlags& f, const std::string& agent_id,
                                                           const std::string& device_key) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto metrics = std::make_unique<PrometheusAgentMetrics>(registry, agent_id, device_key);
  // An agent has no --listen to put its metrics beside: "auto" takes the first free port from
  // kFirstAgentMetricsPort, so that every agent of a board (one per device key) starts and serves
  // its own; the log says which port each took.
  bool beside_others = f.listen == kMetricsBesideListen;
  MetricsEndpointOptions options{beside_others ? fmt::format("127.0.0.1:{}", kFirstAgentMetricsPort) : f.listen,
                                 f.tls,
                                 f.tokens,
                                 f.insecure,
                                 "--metrics-tls-cert, --metrics-tls-key",
                                 "--metrics-token",
                                 "a metrics token (--metrics-token)"};
  for (int port = kFirstAgentMetricsPort + 1;; ++port) {
    auto endpoint = MetricsEndpoint::start(options, registry);
    if (endpoint.ok()) {
      metrics->endpoint = std::move(*endpoint);
      break;
    }
    // Only a taken port moves on: any other mistake is the same on every port.
    if (!beside_others || endpoint.status().code() != StatusCode::kUnavailable)
      return endpoint.status();
    if (port == kFirstAgentMetricsPort + kAgentMetricsPorts)
      return endpoint.status().with_context(fmt::format(
          "--metrics-listen auto: ports {} to {} are all taken; give --metrics-listen HOST:PORT or off",
          kFirstAgentMetricsPort, port - 1));
    options.listen = fmt::format("127.0.0.1:{}", port);
  }
  if (!metrics->endpoint) return std::unique_ptr<AgentMetrics>();
  return std::unique_ptr<AgentMetrics>(std::move(metrics));
}

}  // namespace tunefarm
