// tune-client: the command line for people and scripts (README.md, "Command line"). Commands live
// in one file per group (client/command.h); channels and tokens in client/dial.cc.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "client/command.h"
#include "common/wire/credentials.h"
#include "common/flags.h"
#include "common/logging.h"

namespace {

// The first word of argv that is neither an option nor an option's value: the command.
std::string command_word(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (!arg.starts_with("-")) return std::string(arg);
    if (arg.find('=') != std::string_view::npos) continue;
    const CLI::Option* option = app.get_option_no_throw(std::string(arg));
    if (option && option->get_type_size() > 0) ++i;
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tunefarm;
  CLI::App app{"tune-client: talks to the tuning service and the device farm"};
  app.require_subcommand(1);
  CommonFlags common;
  add_common_flags(app, common, false);
  client::GlobalFlags flags;
  app.add_option("--server", flags.server, "tunerd address; replicas over one history as a list (a:9191,b:9191), used in turn as they go away")->capture_default_str();
  app.add_option("--tracker", flags.tracker, "Tracker address")->capture_default_str();
  add_secret_option(app, "token", flags.token, "TUNEFARM_TOKEN", "Token for tunerd");
  add_secret_option(app, "tracker-token", flags.tracker_token, "TUNEFARM_TRACKER_READ_TOKEN",
                    "Token for listing the farm on a tracker whose tokens are on (its tuner or a reader token)");
  TlsClientFiles tls;
  app.add_option("--tls-ca", tls.ca, "PEM CA to check TLS servers by (dials plaintext without)");
  app.add_option("--tls-cert", tls.cert, "PEM client certificate, for servers that require one");
  app.add_option("--tls-key", tls.key, "PEM private key of --tls-cert");
  client::Commands commands;
  client::add_jobs_commands(app, flags, commands);
  client::add_records_commands(app, flags, commands);
  client::add_models_commands(app, flags, commands);
  client::add_build_commands(app, flags, commands);
  client::add_devices_commands(app, flags, commands);
  for (int i = 1; i < argc; ++i) client::json_errors |= std::string_view(argv[i]) == "--json";
  if (std::string word = command_word(app, argc, argv); !word.empty()) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), word) == names.end())
      return client::fail(fmt::format("unknown command '{}' (commands: {})", word, fmt::join(names, ", ")));
  }
  int exit_code = 0;
  if (!parse_command_line(app, argc, argv, exit_code)) return exit_code;
  if (Status s = setup_logging("tune-client", common.log_level.empty() ? "warn" : common.log_level,
                                common.log_format); !s.ok())
    return client::fail(s.message());
  auto security = channel_credentials(tls);
  if (!security.ok()) return client::fail(security.status().message());
  client::configure_dialing(*security, flags);
  for (auto& command : commands)
    if (command.app->parsed()) return command.run();
  return client::fail("no command given (see --help)");
}
