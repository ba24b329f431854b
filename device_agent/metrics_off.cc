// The agent's metrics in a build without prometheus-cpp (see metrics.h): no flags, nothing served.
#include "device_agent/metrics.h"

namespace tunefarm {

struct AgentMetricsFlags {};

std::shared_ptr<AgentMetricsFlags> add_agent_metrics_flags(CLI::App&) { return std::make_shared<AgentMetricsFlags>(); }

StatusOr<std::unique_ptr<AgentMetrics>> start_agent_metrics(const AgentMetricsFlags&, const std::string&,
                                                           const std::string&) {
  return std::unique_ptr<AgentMetrics>();
}

}  // namespace tunefarm
