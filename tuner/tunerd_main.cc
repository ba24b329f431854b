// tunerd: the tuning service (see tuner/daemon.h, tuner/job_manager.h and tuner/service.h).
//   tunerd --listen 127.0.0.1:9191 --tracker 127.0.0.1:9190 --data-dir DIR
#include "common/flags.h"
#include "tuner/daemon.h"

int main(int argc, char** argv) {
  using namespace tunefarm;
  CLI::App app{"tunerd: runs tuning jobs, measures on the farm through the tracker, keeps the history"};
  CommonFlags common;
  add_common_flags(app, common, true);
  TunerdFlags flags;
  add_tunerd_flags(app, flags);
  int exit_code = 0;
  if (!parse_command_line(app, argc, argv, exit_code)) return exit_code;
  return run_daemon("tunerd", common, [&] { return run_tunerd(std::move(flags)); });
}
