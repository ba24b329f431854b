// tune-client: the command line for people and scripts (see DESIGN.md, "Command line").
#include <grpcpp/grpcpp.h>

#include <fmt/format.h>

#include "client/command.h"
#include "common/flags.h"
#include "common/logging.h"

namespace tunefarm::client {

std::shared_ptr<grpc::Channel> dial(const std::string& address) {
  return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
}

int fail(const std::string& message) {
  fmt::print(stderr, "tune-client: {}\n", message);
  return 1;
}

}  // namespace tunefarm::client

int main(int argc, char** argv) {
  using namespace tunefarm;
  CLI::App app{"tune-client: talks to the tuning service and the device farm"};
  app.require_subcommand(1);
  CommonFlags common;
  add_common_flags(app, common, false);
  client::GlobalFlags flags;
  app.add_option("--server", flags.server, "tunerd address")->capture_default_str();
  app.add_option("--tracker", flags.tracker, "Tracker address")->capture_default_str();
  client::Commands commands;
  client::add_jobs_commands(app, flags, commands);
  client::add_records_commands(app, flags, commands);
  client::add_devices_commands(app, flags, commands);
  int exit_code = 0;
  if (!parse_command_line(app, argc, argv, exit_code)) return exit_code;
  if (Status s = setup_logging("tune-client", common.log_level.empty() ? "warn" : common.log_level); !s.ok())
    return client::fail(s.message());
  for (auto& command : commands)
    if (command.app->parsed()) return command.run();
  return client::fail("no command given (see --help)");
}
