// device-agent: serves one board to a tracker.
//   device-agent --tracker 127.0.0.1:9190 --key local-cpu
#include <signal.h>

#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/credentials.h"
#include "common/flags.h"
#include "common/logging.h"
#include "device_agent/agent.h"
#include "measure/measure.h"

int main(int argc, char** argv) {
  using namespace tunefarm;
  CLI::App app{"device-agent: measures candidates for a tracker on this board"};
  CommonFlags common;
  add_common_flags(app, common, true);
  AgentOptions options;
  MeasurerOptions measurer_options;
  app.add_option("--tracker", options.tracker, "Tracker address to dial")->capture_default_str();
  app.add_option("--key", options.device_key, "Device key this board serves")->capture_default_str();
  app.add_option("--id", options.agent_id, "Agent id, unique per tracker (default: hostname-pid)");
  add_secret_option(app, "token", options.token, "TUNEFARM_AGENT_TOKEN", "Agent token, when the tracker requires one");
  app.add_option("--scratch-dir", measurer_options.scratch_root, "Where the private scratch directory goes (default: $TMPDIR or /tmp)");
  TlsClientFiles tls;
  app.add_option("--tls-ca", tls.ca, "PEM CA to check a TLS tracker by (dials plaintext without)");
  app.add_option("--tls-cert", tls.cert, "PEM client certificate, for a tracker that requires one (mutual TLS)");
  app.add_option("--tls-key", tls.key, "PEM private key of --tls-cert");
  int64_t memory_limit_mb = -1;
  uint64_t max_artifact_mb = kDefaultMaxArtifactBytes >> 20;
  app.add_option("--memory-limit-mb", memory_limit_mb,
                 "Address-space cap of the measurement sandbox (default: 3/4 of this machine's memory, "
                 "none on a board with a GPU; 0: none)");
  app.add_option("--cpu-seconds-per-candidate", measurer_options.cpu_seconds_per_candidate,
                 "CPU time one candidate may use (default: its timeout times the cores)");
  app.add_option("--max-artifact-mb", max_artifact_mb, "Largest artifact this agent loads")->capture_default_str();
  int exit_code = 0;
  if (!parse_command_line(app, argc, argv, exit_code)) return exit_code;
  if (Status s = setup_logging("device-agent", common.log_level); !s.ok()) {
    fmt::print(stderr, "device-agent: {}\n", s.message());
    return 2;
  }

  auto credentials = channel_credentials(tls);
  if (!credentials.ok()) {
    fmt::print(stderr, "device-agent: {}\n", credentials.status().message());
    return 2;
  }
  options.credentials = *credentials;

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  v1::Capabilities capabilities = local_capabilities();
  // The CUDA driver reserves far more address space than any cap that still stops a runaway CPU
  // kernel, so a board with a GPU gets none unless one is asked for.
  if (memory_limit_mb < 0 && !capabilities.gpu_name().empty()) memory_limit_mb = 0;
  measurer_options.memory_limit_bytes = memory_limit_mb < 0 ? -1 : memory_limit_mb << 20;
  measurer_options.max_artifact_bytes = max_artifact_mb << 20;
  auto measurer = Measurer::create(measurer_options);
  if (!measurer.ok()) {
    fmt::print(stderr, "device-agent: {}\n", measurer.status().message());
    return 1;
  }
  if (Status s = (*measurer)->self_test(); !s.ok()) {
    fmt::print(stderr, "device-agent: {}\n", s.message());
    return 1;
  }
  auto measure = [m = measurer->get()](const v1::LeasedBatch& batch, const v1::Candidate& candidate) {
    return m->measure(batch.workload(), batch.options(), batch.has_reference() ? &batch.reference() : nullptr,
                      candidate.artifact());
  };
  DeviceAgent agent(options, capabilities, measure);
  std::thread signal_waiter([&agent, &signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("signal {}: stopping", sig);
    agent.stop();
  });
  signal_waiter.detach();
  Status s = agent.run();
  if (!s.ok()) {
    fmt::print(stderr, "device-agent: {}\n", s.code() == StatusCode::kFailedPrecondition
                                                  ? s.message()
                                                  : "the tracker refused this agent: " + s.to_string());
    return 1;
  }
  return 0;
}
