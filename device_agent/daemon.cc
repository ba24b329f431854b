#include "device_agent/daemon.h"

#include <chrono>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/cpu_detect.h"
#include "common/flags.h"
#include "measure/cuda_runner.h"
#include "measure/sandbox.h"

namespace tunefarm {

void add_agent_flags(CLI::App& app, AgentFlags& f) {
  app.add_option("--tracker", f.agent.tracker, "Tracker address to dial")->capture_default_str();
  app.add_option("--key", f.agent.device_key, "Device key this board serves")->capture_default_str();
  app.add_option("--id", f.agent.agent_id, "Agent id, unique per tracker (default: hostname-pid)");
  add_secret_option(app, "token", f.agent.token, "TUNEFARM_AGENT_TOKEN", "Agent token, when the tracker requires one");
  app.add_option("--scratch-dir", f.measurer.scratch_root,
                 "Where the private scratch directory goes (default: $TMPDIR or /tmp)");
  app.add_option("--tls-ca", f.tls.ca, "PEM CA to check a TLS tracker by (dials plaintext without)");
  app.add_option("--tls-cert", f.tls.cert, "PEM client certificate, for a tracker that requires one (mutual TLS)");
  app.add_option("--tls-key", f.tls.key, "PEM private key of --tls-cert");
  app.add_option("--memory-limit-mb", f.memory_limit_mb,
                 "Address-space cap of the measurement sandbox (default: 3/4 of this machine's memory, "
                 "none on a board with a GPU; 0: none)");
  app.add_option("--cpu-seconds-per-candidate", f.measurer.cpu_seconds_per_candidate,
                 "CPU time one candidate may use (default: its timeout times the cores)");
  app.add_option("--worker-launcher", f.measurer.worker_launcher,
                 "Program (and its arguments) that runs the measurement worker, e.g. qemu-aarch64 for an agent "
                 "under user-mode emulation where binfmt_misc does not run aarch64 programs")
      ->allow_extra_args(false)
      ->delimiter(' ');
  app.add_option("--cgroup", f.measurer.cgroup,
                 "A cgroup v2 directory delegated to this agent, in which it makes each candidate's cgroup (default: "
                 "its own cgroup where it may manage it, else cgroup v1's memory and pids hierarchies)");
  app.add_option("--pids-per-candidate", f.measurer.pids_per_candidate,
                 fmt::format("Threads and processes one candidate may have, by its cgroup (default: {} or 4 per core, "
                             "whichever is more)",
                             kDefaultPidsPerCandidate));
  app.add_flag("--no-namespaces", [&f](int64_t) { f.measurer.namespaces = false; },
               "Run kernels without namespaces even where this system offers them, as in a container without "
               "user namespaces (the start lines say what is missing then)");
  app.add_option("--sandbox-without", f.sandbox_without,
                 "Turn off one layer of the kernels' sandbox (landlock, seccomp, nobody or private-dev; repeatable), for a board "
                 "whose driver it breaks: the start lines warn of each")
      ->check([](const std::string& name) {
        auto bit = sandbox_layer_bit(name);
        return bit.ok() ? std::string() : std::string(bit.status().message());
      });
  app.add_option("--max-artifact-mb", f.max_artifact_mb, "Largest artifact this agent loads")->capture_default_str();
  app.add_option("--cpu", f.cpu,
                 "This board's CPU as LLVM names it (e.g. haswell, cortex-a72), which tunerd compiles its jobs for "
                 "(default: detected; a CPU named here brings its own features, not this machine's)");
  app.add_option("--cpu-features", f.cpu_features,
                 "Its vector features in LLVM's spelling, e.g. +avx2,-avx512f (default: detected, or the --cpu "
                 "CPU's own)")
      ->each([&f](const std::string&) { f.cpu_features_given = true; });
  f.metrics = add_agent_metrics_flags(app);
}

namespace {

// Below this the measurement worker cannot even start its threads (it aborts with a
// std::system_error that the self-test would then report first): a cap that small is a mistake in
// the flags, said as such before any worker runs.
constexpr int64_t kMinMemoryLimitMb = 32;

// What the self-test's worker said of its sandbox: the layers in one line, each missing one in a
// warning of its own, so that whoever runs the agent sees what a hostile kernel could still do.
void log_sandbox(const std::string& description) {
  std::string_view rest = description;
  for (bool first = true; !rest.empty(); first = false) {
    size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    if (first) spdlog::info("measurement sandbox: {}", line);
    else if (!line.empty()) spdlog::warn("measurement sandbox: {}", line);
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
}

}  // namespace

DaemonExit run_device_agent(AgentFlags f) {
  // Before gRPC starts its threads (making credentials starts them): a thread that does not block
  // SIGTERM would take it, and the agent would end without removing its scratch and cgroups.
  StopSignals signals;
  auto credentials = channel_credentials(f.tls);
  if (!credentials.ok()) return DaemonExit::configuration(credentials.status());
  f.agent.credentials = *credentials;

  // Before the sandbox starts: a mistake in the flags is said at once.
  if (f.memory_limit_mb > 0 && f.memory_limit_mb < kMinMemoryLimitMb)
    return DaemonExit::configuration(invalid_argument(fmt::format(
        "--memory-limit-mb {}: the measurement worker alone needs about {} MiB of address space, before any "
        "kernel's tensors; give at least {} (a few times the largest kernel's tensors), or 0 for no cap",
        f.memory_limit_mb, kMinMemoryLimitMb, kMinMemoryLimitMb)));
  if (f.agent.agent_id.empty()) f.agent.agent_id = default_agent_id();
  auto metrics = start_agent_metrics(*f.metrics, f.agent.agent_id, f.agent.device_key);
  if (!metrics.ok()) return DaemonExit::of(metrics.status());
  v1::Capabilities capabilities = local_capabilities();
  CpuDescription cpu{capabilities.cpu_name(), capabilities.cpu_features()};
  if (!f.cpu.empty()) cpu = {f.cpu, ""};
  if (f.cpu_features_given) cpu.features = f.cpu_features;
  if (Status s = check_cpu_description(cpu); !s.ok())
    return DaemonExit::configuration(s.with_context("--cpu, --cpu-features"));
  capabilities.set_cpu_name(cpu.name);
  capabilities.set_cpu_features(cpu.features);
  spdlog::info("CPU {} ({}{}), as tunerd will compile for it", cpu.name,
               cpu.features.empty() ? "its own features" : cpu.features,
               f.cpu.empty() && !f.cpu_features_given ? "; detected" : "; from --cpu/--cpu-features");
  const bool gpu = !capabilities.gpu_name().empty();
  // Whether this board serves CUDA jobs, and if not why, is the first thing to know of a GPU board.
  if (gpu) spdlog::info("GPU {}: measures 'cuda' candidates", capabilities.gpu_name());
  else spdlog::info("no 'cuda' target: {}", cuda_device_name().status().message());
  // The CUDA driver reserves far more address space than any cap that still stops a runaway CPU
  // kernel, so a board with a GPU gets none unless one is asked for.
  if (f.memory_limit_mb < 0 && gpu) f.memory_limit_mb = 0;
  f.measurer.memory_limit_bytes = f.memory_limit_mb < 0 ? -1 : f.memory_limit_mb << 20;
  for (const std::string& layer : f.sandbox_without) f.measurer.sandbox_without |= *sandbox_layer_bit(layer);
  f.measurer.gpu = gpu;
  f.measurer.max_artifact_bytes = f.max_artifact_mb << 20;
  auto measurer = Measurer::create(f.measurer);
  if (!measurer.ok()) return DaemonExit::environment(measurer.status());
  if (Status s = (*measurer)->self_test(); !s.ok()) return DaemonExit::environment(s);
  log_sandbox((*measurer)->sandbox_description());
  auto measure = [m = measurer->get(), counters = metrics->get()](const v1::LeasedBatch& batch,
                                                                  const v1::Candidate& candidate) {
    auto begin = std::chrono::steady_clock::now();
    v1::MeasureResult result = m->measure(batch.workload(), batch.options(),
                                          batch.has_reference() ? &batch.reference() : nullptr, candidate.artifact());
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    // Every candidate has a fresh worker; the ones that a crash or a timeout killed are counted.
    bool killed = result.error() == v1::RUNTIME_ERROR || result.error() == v1::RUN_TIMEOUT;
    if (counters) counters->measured(result, seconds, killed ? 1 : 0);
    return result;
  };
  // A worker that cannot start (its program gone or broken, its sandbox refused) fails every
  // candidate alike: the probe kernel decides whether this agent can measure, not the candidates.
  f.agent.can_measure = [m = measurer->get()] { return m->failed_starts() == 0 ? Status() : m->self_test(); };
  DeviceAgent agent(f.agent, capabilities, measure);
  // Detached: when the tracker refuses the agent, run() returns while this thread still waits.
  std::thread([&agent, signals]() mutable {
    int sig = signals.wait();
    spdlog::info("signal {}: stopping", sig);
    agent.stop();
  }).detach();
  Status s = agent.run();
  if (s.ok()) return DaemonExit::ok();
  if (s.code() == StatusCode::kFailedPrecondition) return DaemonExit::environment(s);
  return {1, "the tracker refused this agent: " + s.to_string()};
}

}  // namespace tunefarm
