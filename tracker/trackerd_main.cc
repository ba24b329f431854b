// trackerd: the broker between tuners and device agents (see tracker/daemon.h and tracker/broker.h).
//   trackerd --listen 127.0.0.1:9190
#include "common/flags.h"
#include "tracker/daemon.h"

int main(int argc, char** argv) {
  using namespace tunefarm;
  CLI::App app{"trackerd: brokers measurement batches from tuners to device agents"};
  CommonFlags common;
  add_common_flags(app, common, true);
  TrackerdFlags flags;
  add_trackerd_flags(app, flags);
  int exit_code = 0;
  if (!parse_command_line(app, argc, argv, exit_code)) return exit_code;
  return run_daemon("trackerd", common, [&] { return run_trackerd(std::move(flags)); });
}
