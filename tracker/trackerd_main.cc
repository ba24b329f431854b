// trackerd: the broker between tuners and device agents (see tracker/broker.h).
//   trackerd --listen 127.0.0.1:9190
#include <atomic>
#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "common/credentials.h"
#include "common/daemon.h"
#include "common/flags.h"
#include "common/logging.h"
#include "tracker/service.h"

int main(int argc, char** argv) {
  using namespace tunefarm;
  CLI::App app{"trackerd: brokers measurement batches from tuners to device agents"};
  CommonFlags common;
  add_common_flags(app, common, true);
  std::string listen = "127.0.0.1:9190";
  BrokerOptions options;
  int heartbeat_timeout_ms = static_cast<int>(options.heartbeat_timeout.count());
  int no_agent_timeout_s = 30;
  double drain_timeout_s = 30;
  bool insecure = false;
  app.add_option("--listen", listen, "Address to serve on")->capture_default_str();
  add_secret_option(app, "agent-token", options.agent_token, "TUNEFARM_AGENT_TOKEN",
                    "Token agents must present in their hello");
  add_secret_option(app, "tuner-token", options.tuner_token, "TUNEFARM_TUNER_TOKEN",
                    "Token tuners must present with each Measure request");
  add_secret_option(app, "reader-token", options.reader_tokens, "TUNEFARM_READER_TOKEN",
                    "Token that may only list the farm's devices and queues (repeatable)");
  TlsServerFiles tls;
  app.add_option("--tls-cert", tls.cert, "PEM certificate to serve TLS with (see deploy/make-certs.sh)");
  app.add_option("--tls-key", tls.key, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", tls.client_ca, "PEM CA that agents' and tuners' client certificates must chain to "
                                                   "(mutual TLS)");
  app.add_flag("--insecure", insecure, "Allow a non-loopback address without TLS and tokens");
  app.add_option("--max-artifact-bytes", options.max_artifact_bytes, "Largest artifact a request may carry")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max-lease-candidates", options.max_lease_candidates, "Largest chunk of a request leased to one agent")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--min-lease-candidates", options.min_lease_candidates,
                 "Smallest chunk leased to one agent while a request has that many pending")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max-attempts", options.max_attempts, "Agents a candidate may be lost on before DEVICE_LOST")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--heartbeat-timeout-ms", heartbeat_timeout_ms, "Silence after which an agent is dropped")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--no-agent-timeout-s", no_agent_timeout_s, "How long requests wait for a device key with no agent")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--drain-timeout-s", drain_timeout_s, "On SIGTERM, how long to let leased work finish")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  int exit_code = 0;
  if (!parse_command_line(app, argc, argv, exit_code)) return exit_code;
  if (Status s = setup_logging("trackerd", common.log_level); !s.ok()) {
    fmt::print(stderr, "trackerd: {}\n", s.message());
    return 2;
  }
  Exposure exposure{listen, tls.enabled(), !options.agent_token.empty() && !options.tuner_token.empty(), insecure,
                    "--tls-cert, --tls-key", "--agent-token, --tuner-token",
                    "whoever can reach it may send code to the boards or read what they are sent"};
  if (Status s = check_exposure(exposure); !s.ok()) {
    fmt::print(stderr, "trackerd: {}\n", s.message());
    return 2;
  }
  auto credentials = server_credentials(tls);
  if (!credentials.ok()) {
    fmt::print(stderr, "trackerd: {}\n", credentials.status().message());
    return 2;
  }
  options.heartbeat_timeout = std::chrono::milliseconds(heartbeat_timeout_ms);
  options.heartbeat_interval = std::max(std::chrono::milliseconds(50), options.heartbeat_timeout / 5);
  options.no_agent_timeout = std::chrono::seconds(no_agent_timeout_s);

  // Signals are taken by sigwait below; every thread started from here on inherits the mask.
  StopSignals signals;

  Broker broker(options);
  TrackerService service(broker);
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(kMaxTrackerMessageBytes);
  builder.SetMaxSendMessageSize(kMaxTrackerMessageBytes);
  builder.RegisterService(&service);
  auto server = start_server(builder, listen, *credentials);
  if (!server.ok()) {
    fmt::print(stderr, "trackerd: {}\n", server.status().message());
    return 1;
  }
  spdlog::info("listening on {}", listen);

  std::atomic<bool> stopping{false};
  std::thread ticker([&] {
    while (!stopping.load()) {
      broker.tick();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  int sig = signals.wait();
  spdlog::info("signal {}: draining (up to {} s)", sig, drain_timeout_s);
  broker.begin_drain();
  auto drain_until = std::chrono::steady_clock::now() + std::chrono::duration<double>(drain_timeout_s);
  while (!broker.idle() && std::chrono::steady_clock::now() < drain_until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  broker.fail_all("the tracker shut down before an agent answered");
  broker.close_all_sessions(unavailable("the tracker is shutting down"));
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  stopping = true;
  ticker.join();
  spdlog::info("stopped");
  return 0;
}
