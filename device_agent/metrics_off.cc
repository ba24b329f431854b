// The agent's metrics in a build without prometheus-cpp (see metrics.h): nothing served. The
// flag stays, so that the command lines and unit files written for the full agent (`--metrics-listen
// off`, the default `auto`) work here too; an address is refused, since nothing could serve it.
#include "device_agent/metrics.h"

#include <fmt/format.h>

namespace tunefarm {

struct AgentMetricsFlags {
  std::string listen = "auto";
};

std::shared_ptr<AgentMetricsFlags> add_agent_metrics_flags(CLI::App& app) {
  auto f = std::make_shared<AgentMetricsFlags>();
  app.add_option("--metrics-listen", f->listen, "off or auto: this agent was built without metrics")
      ->capture_default_str();
  return f;
}

StatusOr<std::unique_ptr<AgentMetrics>> start_agent_metrics(const AgentMetricsFlags& f, const std::string&,
                                                           const std::string&) {
  if (f.listen != "off" && f.listen != "auto")
    return invalid_argument(fmt::format(
        "--metrics-listen {}: this agent was built without metrics (no prometheus-cpp for its architecture); "
        "give --metrics-listen off or leave it out",
        f.listen));
  return std::unique_ptr<AgentMetrics>();
}

}  // namespace tunefarm
