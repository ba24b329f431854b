// tune-client devices: the farm's queue status per device key, for people or (--json) scripts.
#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <grpcpp/grpcpp.h>

#include "client/command.h"
#include "client/output.h"
#include "common/wire/credentials.h"
#include "tunefarm/v1/tracker.grpc.pb.h"

namespace tunefarm::client {
namespace {

struct DevicesFlags {
  bool json = false;
  std::string key;
};

std::string uptime(double seconds) {
  if (seconds < 120) return fmt::format("{:.0f}s", seconds);
  if (seconds < 7200) return fmt::format("{:.0f}m", seconds / 60);
  return fmt::format("{:.1f}h", seconds / 3600);
}

void print_table(const v1::QueueStatusResponse& status) {
  if (status.keys().empty()) {
    fmt::print("no device keys: no agent has registered with this tracker\n");
    return;
  }
  fmt::print("{:<20} {:>6} {:>5} {:>5} {:>16} {:>19}\n", "KEY", "AGENTS", "FREE", "BUSY", "PENDING BATCHES",
             "PENDING CANDIDATES");
  for (const auto& key : status.keys())
    fmt::print("{:<20} {:>6} {:>5} {:>5} {:>16} {:>19}\n", key.device_key(), key.agents_total(), key.agents_free(),
               key.agents_busy(), key.pending_batches(), key.pending_candidates());
  fmt::print("\n{:<28} {:<20} {:<24} {:<8} {:<16} {:<10} {:>7} {:>8} {:<6} {}\n", "AGENT", "KEY", "ADDRESS", "ARCH",
             "CPU", "TARGETS", "UPTIME", "BATCHES", "STATE", "LAST ERROR");
  for (const auto& key : status.keys())
    for (const auto& agent : key.agents()) {
      const v1::Capabilities& caps = agent.capabilities();
      // An agent older than the arch field does not say; tunerd then accepts any target for its key.
      fmt::print("{:<28} {:<20} {:<24} {:<8} {:<16} {:<10} {:>7} {:>8} {:<6} {}\n", agent.agent_id(),
                 agent.device_key(), agent.address(), caps.arch().empty() ? "?" : caps.arch(),
                 caps.cpu_name().empty() ? "?" : caps.cpu_name(),
                 caps.targets().empty() ? "-" : fmt::format("{}", fmt::join(caps.targets(), ",")),
                 uptime(agent.uptime_s()), agent.batches_done(), agent.busy() ? "busy" : "free",
                 agent.last_error().empty() ? "-" : agent.last_error().substr(0, 80));
    }
  // The features are long; they are shown where they matter: when the agents of a key differ.
  for (const auto& key : status.keys())
    if (!key.cpu_disagreement().empty()) fmt::print("\nwarning: {}\n", key.cpu_disagreement());
}

int run_devices(const GlobalFlags& global, const DevicesFlags& flags) {
  auto stub = v1::Tracker::NewStub(dial(global.tracker));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::QueueStatusRequest request;
  request.set_device_key(flags.key);
  v1::QueueStatusResponse response;
  grpc::Status status = stub->QueueStatus(&context, request, &response);
  if (!status.ok()) {
    // Unreachable says what to check (is it there, its address, TLS), as tunerd's commands do.
    std::string hint = status.error_code() == grpc::StatusCode::UNAVAILABLE
                           ? unreachable_hint(status.error_message(), "--tls-ca")
                           : "";
    return fail(fmt::format("cannot get the queue status from the tracker at {}: {}{}", global.tracker,
                            status.error_message().empty() ? "no answer" : status.error_message(), hint));
  }
  if (!flags.json) {
    print_table(response);
    return 0;
  }
  fmt::print("{}\n", to_json(response));
  return 0;
}

}  // namespace

void add_devices_commands(CLI::App& app, const GlobalFlags& global, Commands& commands) {
  auto flags = std::make_shared<DevicesFlags>();
  CLI::App* devices = app.add_subcommand("devices", "The farm's queue status per device key");
  devices->add_flag("--json", flags->json, "Print JSON instead of a table");
  devices->add_option("--key", flags->key, "Only this device key");
  commands.push_back({devices, [&global, flags] { return run_devices(global, *flags); }});
}

}  // namespace tunefarm::client
