#include "common/http/metrics.h"

#include <sstream>

#include <fmt/format.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include "common/daemon/daemon.h"
#include "common/http/http_server.h"

namespace tunefarm {

void add_metrics_listen_flag(CLI::App& app, std::string& listen, const std::string& default_listen,
                             const std::string& auto_means) {
  listen = default_listen;
  app.add_option("--metrics-listen", listen,
                 fmt::format("Address of the Prometheus metrics endpoint (GET /metrics): host:port, a port (on "
                             "127.0.0.1), auto ({}), or off. Beyond loopback it needs TLS and tokens, as the daemon does",
                             auto_means))
      ->envname("TUNEFARM_METRICS_LISTEN")
      ->capture_default_str();
}

StatusOr<std::string> resolve_metrics_listen(const std::string& metrics_listen, const std::string& listen) {
  if (metrics_listen != kMetricsBesideListen) return metrics_listen;
  std::string address = normalize_listen_address(listen);
  TF_ASSIGN_OR_RETURN(int port, listen_port(address));
  if (port + 200 > 65535)
    return invalid_argument(fmt::format("--metrics-listen auto: the --listen port {} leaves no room for one 200 "
                                        "above it; give --metrics-listen HOST:PORT or off",
                                        port));
  size_t colon = address.rfind(':');
  return fmt::format("{}:{}", address.substr(0, colon), port + 200);
}

std::vector<double> duration_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

std::string render_metrics(prometheus::Registry& registry) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry.Collect());
  return out.str();
}

StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::start(const MetricsEndpointOptions& options,
                                                                  std::shared_ptr<prometheus::Registry> registry,
                                                                  std::function<void()> before_scrape) {
  if (options.listen == kMetricsOff || options.listen.empty()) return std::unique_ptr<MetricsEndpoint>();
  std::string listen = normalize_listen_address(options.listen);
  Exposure exposure{listen,
                    options.tls.enabled(),
                    !options.tokens.empty(),
                    options.insecure,
                    options.tls_flags,
                    options.token_flags,
                    "whoever can reach it may read the farm's metrics"};
  TF_RETURN_IF_ERROR(check_exposure(exposure).with_context("--metrics-listen"));
  HttpServerOptions http;
  http.listen = listen;
  http.tls_cert = options.tls.cert;
  http.tls_key = options.tls.key;
  http.tokens = options.tokens;
  http.token_hint = options.token_hint;
  http.name = "metrics";
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  endpoint->registry_ = registry;
  prometheus::Registry* r = registry.get();
  auto metrics = [r, before_scrape](const HttpRequest&) {
    if (before_scrape) before_scrape();
    HttpResponse response;
    response.content_type = "text/plain; version=0.0.4; charset=utf-8";
    response.body = render_metrics(*r);
    return response;
  };
  auto index = [](const HttpRequest&) {
    HttpResponse response;
    response.body = "tunefarm metrics: GET /metrics\n";
    return response;
  };
  TF_ASSIGN_OR_RETURN(endpoint->server_, HttpServer::start(std::move(http), {{"/metrics", metrics}, {"/", index}}));
  spdlog::info("metrics on {}://{}/metrics", options.tls.enabled() ? "https" : "http", endpoint->server_->address());
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() = default;

const std::string& MetricsEndpoint::address() const { return server_->address(); }

}  // namespace tunefarm
