#include "common/platform.h"

#include <sys/utsname.h>

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tunefarm {
namespace {

bool can_run(const AgentPlatform& agent, const Target& target, const std::string& arch) {
  if (target.kind == Target::Kind::kCUDA) return agent.cuda;
  return agent.arch == arch;
}

// "1 agent, x86_64 without CUDA", "2 agents, all x86_64 without CUDA",
// "3 agents: 2 x86_64 without CUDA, 1 aarch64 with CUDA".
std::string describe(std::span<const AgentPlatform> agents) {
  std::vector<std::pair<std::string, int>> kinds;  // In the order first seen, so the message is stable.
  for (const AgentPlatform& agent : agents) {
    std::string kind = fmt::format("{} {} CUDA", agent.arch, agent.cuda ? "with" : "without");
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == kind; });
    if (it == kinds.end()) kinds.emplace_back(std::move(kind), 1);
    else ++it->second;
  }
  if (agents.size() == 1) return "1 agent, " + kinds[0].first;
  if (kinds.size() == 1) return fmt::format("{} agents, all {}", agents.size(), kinds[0].first);
  std::string out = fmt::format("{} agents:", agents.size());
  for (size_t i = 0; i < kinds.size(); ++i)
    out += fmt::format("{} {} {}", i ? "," : "", kinds[i].second, kinds[i].first);
  return out;
}

// "haswell +avx2,-avx512f", or "haswell" alone.
std::string cpu_of(const AgentPlatform& agent) {
  return agent.cpu_features.empty() ? agent.cpu_name : agent.cpu_name + " " + agent.cpu_features;
}

}  // namespace

std::string llvm_arch_name(std::string_view machine) {
  if (machine == "arm64") return "aarch64";
  if (machine == "amd64") return "x86_64";
  return std::string(machine);
}

std::string host_arch() {
  utsname names{};
  if (uname(&names) != 0) return "unknown";
  return llvm_arch_name(names.machine);
}

std::string target_arch(const Target& target, std::string_view host_arch) {
  if (target.kind == Target::Kind::kCUDA) return "";
  if (target.mtriple.empty()) return std::string(host_arch);
  return llvm_arch_name(std::string_view(target.mtriple).substr(0, target.mtriple.find('-')));
}

Status check_agents_can_run(const std::string& device_key, const Target& target,
                            std::span<const AgentPlatform> agents, std::string_view host_arch) {
  // No agents say nothing against the target (whether a key may wait for agents is the device-key
  // check's to decide); an agent too old to name its architecture may run anything.
  if (agents.empty()) return Status();
  std::string arch = target_arch(target, host_arch);
  for (const AgentPlatform& agent : agents)
    if (agent.arch.empty() || can_run(agent, target, arch)) return Status();
  std::string needs = target.kind == Target::Kind::kCUDA ? "an agent with a CUDA GPU" : "an " + arch + " CPU";
  std::string instead = target.kind == Target::Kind::kCUDA ? "whose agents have a CUDA GPU" : "with " + arch + " agents";
  return invalid_argument(fmt::format(
      "device key '{}' cannot run target '{}', which needs {}: the key has {}. Submit to a key {} "
      "('tune-client devices' shows each agent's architecture and targets), or choose a target its agents run",
      device_key, target.to_string(), needs, describe(agents), instead));
}

Status check_agents_agree_on_cpu(const std::string& device_key, std::span<const AgentPlatform> agents) {
  // Each CPU with the agents that have it, in the order first seen, so that the message is stable.
  std::vector<std::pair<std::string, std::vector<std::string>>> cpus;
  for (const AgentPlatform& agent : agents) {
    if (agent.cpu_name.empty()) continue;
    std::string cpu = cpu_of(agent);
    auto it = std::find_if(cpus.begin(), cpus.end(), [&](const auto& c) { return c.first == cpu; });
    if (it == cpus.end()) cpus.push_back({cpu, {agent.agent_id}});
    else it->second.push_back(agent.agent_id);
  }
  if (cpus.size() <= 1) return Status();
  std::string groups;
  for (const auto& [cpu, ids] : cpus)
    groups += fmt::format("{}{} ({})", groups.empty() ? "" : "; ", fmt::join(ids, ", "), cpu);
  return failed_precondition(fmt::format(
      "the agents of device key '{}' differ in CPU: {}. A job is compiled for one CPU per key: give each kind of "
      "board a key of its own (device-agent --key), or have the agents declare one CPU (--cpu, --cpu-features)",
      device_key, groups));
}

Target resolve_target(const Target& target, std::span<const AgentPlatform> agents) {
  if (target.kind != Target::Kind::kLLVM || !target.mcpu.empty()) return target;
  auto named = std::find_if(agents.begin(), agents.end(), [](const AgentPlatform& a) { return !a.cpu_name.empty(); });
  if (named == agents.end()) return target;
  Target resolved = target;
  resolved.mcpu = named->cpu_name;
  if (resolved.mattr.empty()) resolved.mattr = named->cpu_features;
  return resolved;
}

}  // namespace tunefarm
