#include "tracker/daemon.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "common/flags.h"
#include "common/http/metrics.h"
#include "tracker/metrics.h"
#include "tracker/service.h"

namespace tunefarm {

void add_trackerd_flags(CLI::App& app, TrackerdFlags& f) {
  BrokerOptions& o = f.broker;
  app.add_option("--listen", f.listen, "Address to serve on")->capture_default_str();
  add_metrics_listen_flag(app, f.metrics_listen, kMetricsBesideListen);
  add_secret_option(app, "agent-token", o.agent_token, "TUNEFARM_AGENT_TOKEN", "Token agents must present (on their session's metadata and in their hello)");
  add_secret_option(app, "tuner-token", o.tuner_token, "TUNEFARM_TUNER_TOKEN",
                    "Token tuners must present with each Measure request (on its metadata and in it)");
  add_secret_option(app, "reader-token", o.reader_tokens, "TUNEFARM_READER_TOKEN",
                    "Token that may only list the farm's devices and queues (repeatable)");
  app.add_option("--tls-cert", f.tls.cert, "PEM certificate to serve TLS with (see deploy/make-certs.sh)");
  app.add_option("--tls-key", f.tls.key, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", f.tls.client_ca,
                 "PEM CA that agents' and tuners' client certificates must chain to (mutual TLS)");
  app.add_flag("--insecure", f.insecure, "Allow a non-loopback address without TLS and tokens");
  app.add_option("--max-artifact-bytes", o.max_artifact_bytes, "Largest artifact a request may carry")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max-lease-candidates", o.max_lease_candidates, "Largest chunk of a request leased to one agent")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--min-lease-candidates", o.min_lease_candidates,
                 "Smallest chunk leased to one agent while a request has that many pending")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max-attempts", o.max_attempts, "Agents a candidate may be lost on before DEVICE_LOST")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--heartbeat-timeout-ms", f.heartbeat_timeout_ms, "Silence after which an agent is dropped")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--no-agent-timeout-s", f.no_agent_timeout_s, "How long requests wait for a device key with no agent")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--drain-timeout-s", f.drain_timeout_s, "On SIGTERM, how long to let leased work finish")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
}

namespace {

// Expires leases and heartbeats while the tracker serves.
class Ticker {
 public:
  explicit Ticker(Broker& broker)
      : thread_([this, &broker] {
          while (!stopping_.load()) {
            broker.tick();
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        }) {}
  ~Ticker() {
    stopping_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

void drain(Broker& broker, double timeout_s) {
  broker.begin_drain();
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!broker.idle() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  broker.fail_all("the tracker shut down before an agent answered");
  broker.close_all_sessions(unavailable("the tracker is shutting down"));
}

}  // namespace

DaemonExit run_trackerd(TrackerdFlags f) {
  BrokerOptions& options = f.broker;
  Exposure exposure{f.listen, f.tls.enabled(), !options.agent_token.empty() && !options.tuner_token.empty(),
                    f.insecure, "--tls-cert, --tls-key", "--agent-token-file, --tuner-token-file",
                    "whoever can reach it may send code to the boards or read what they are sent"};
  // A Measure request may be a GiB of artifacts: a call without any of the farm's tokens in its
  // metadata is refused before it is read; which token each RPC needs is the service's check.
  auto credentials = serving_credentials(exposure, f.tls, tracker_gate(options));
  if (!credentials.ok()) return DaemonExit::configuration(credentials.status());
  options.heartbeat_timeout = std::chrono::milliseconds(f.heartbeat_timeout_ms);
  options.heartbeat_interval = std::max(std::chrono::milliseconds(50), options.heartbeat_timeout / 5);
  options.no_agent_timeout = std::chrono::seconds(f.no_agent_timeout_s);
  auto metrics_listen = resolve_metrics_listen(f.metrics_listen, f.listen);
  if (!metrics_listen.ok()) return DaemonExit::configuration(metrics_listen.status());

  StopSignals signals;
  auto registry = std::make_shared<prometheus::Registry>();
  options.metrics = std::make_shared<TrackerMetrics>(*registry);
  Broker broker(options);
  TrackerService service(broker);
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(kMaxTrackerMessageBytes);
  builder.SetMaxSendMessageSize(kMaxTrackerMessageBytes);
  builder.RegisterService(&service);
  // The service's address first: a second trackerd started on a taken --listen says so, rather
  // than that the metrics port beside it is taken (by the first trackerd's metrics).
  auto server = start_server(builder, f.listen, *credentials);
  if (!server.ok()) return DaemonExit::environment(server.status());
  // The metrics are the farm's inventory: the same tokens that may list it may scrape them.
  MetricsEndpointOptions metrics_options{*metrics_listen, f.tls, options.reader_tokens, f.insecure,
                                         "--tls-cert, --tls-key", "--tuner-token-file or --reader-token-file",
                                         "the tuner token or a reader token"};
  if (!options.tuner_token.empty()) metrics_options.tokens.push_back(options.tuner_token);
  auto metrics = MetricsEndpoint::start(metrics_options, registry, [&broker, m = options.metrics] {
    m->sample(broker.queue_status(""));
  });
  if (!metrics.ok()) {
    (*server)->Shutdown(std::chrono::system_clock::now());
    return DaemonExit::of(metrics.status());
  }
  spdlog::info("listening on {}", f.listen);
  {
    Ticker ticker(broker);
    int sig = signals.wait();
    spdlog::info("signal {}: draining (up to {} s)", sig, f.drain_timeout_s);
    drain(broker, f.drain_timeout_s);
    (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  spdlog::info("stopped");
  return DaemonExit::ok();
}

}  // namespace tunefarm
