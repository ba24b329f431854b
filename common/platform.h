// Which boards can run a target. Agents name their architecture in their hello with host_arch();
// tunerd checks a job's target against the agents of its device key with check_agents_can_run(),
// so that a job no agent can run is refused at submit rather than failing candidate by candidate.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/target.h"

namespace tunefarm {

// LLVM's name for an architecture as uname or a triple spells it: "arm64" is "aarch64" and "amd64"
// is "x86_64"; any other name is LLVM's already.
std::string llvm_arch_name(std::string_view machine);

// This machine's architecture as LLVM names it, from uname; "unknown" when uname fails.
std::string host_arch();

// The architecture whose CPUs run `target`: its triple's first part, or `host_arch` for a target
// that names no triple (tunerd compiles those for its own host). Empty for CUDA: PTX runs on the
// GPU whatever CPU drives it.
std::string target_arch(const Target& target, std::string_view host_arch);

// What one agent of a device key said it can run.
struct AgentPlatform {
  std::string arch;   // As llvm_arch_name() spells it; empty from agents too old to say.
  bool cuda = false;  // It has a CUDA driver and at least one device.
  std::string agent_id;
  // Its CPU as LLVM names it, and its features (common/cpu_detect.h); empty from agents too old
  // to say.
  std::string cpu_name;
  std::string cpu_features;
  // Capabilities.stream_bytes_per_s: how fast its CPU moves a model step's bytes; 0 when unknown.
  double stream_bytes_per_s = 0;
};

// OK when one of `agents` can run `target`, when one of them is too old to say, or when there are
// none. Otherwise INVALID_ARGUMENT naming the key, what its agents
// are ("2 agents, all x86_64 without CUDA") and the target, and what to do instead.
Status check_agents_can_run(const std::string& device_key, const Target& target,
                            std::span<const AgentPlatform> agents, std::string_view host_arch);

// OK when the agents of `device_key` that name their CPU name the same one, with the same
// features. Otherwise FAILED_PRECONDITION saying which agents have which CPU: tunerd compiles one
// code per key, so a key must stand for one kind of board.
Status check_agents_agree_on_cpu(const std::string& device_key, std::span<const AgentPlatform> agents);

// What a job's candidates are compiled for on a key whose agents agree on their CPU: an llvm
// `target` that names no -mcpu gets the agents' CPU as -mcpu, and their features as -mattr
// unless it names its own. CUDA targets, targets with -mcpu, and keys with no agent that names
// its CPU keep `target` as it is.
Target resolve_target(const Target& target, std::span<const AgentPlatform> agents);

}  // namespace tunefarm
