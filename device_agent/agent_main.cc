// device-agent: serves one board to a tracker (see device_agent/daemon.h and device_agent/agent.h).
//   device-agent --tracker 127.0.0.1:9190 --key local-cpu
#include "common/flags.h"
#include "device_agent/daemon.h"

int main(int argc, char** argv) {
  using namespace tunefarm;
  CLI::App app{"device-agent: measures candidates for a tracker on this board"};
  CommonFlags common;
  add_common_flags(app, common, true);
  AgentFlags flags;
  add_agent_flags(app, flags);
  int exit_code = 0;
  if (!parse_command_line(app, argc, argv, exit_code)) return exit_code;
  return run_daemon("device-agent", common, [&] { return run_device_agent(std::move(flags)); });
}
