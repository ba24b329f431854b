#include "common/flags.h"

#include <iostream>

namespace tunefarm {

void add_common_flags(CLI::App& app, CommonFlags& flags, bool with_config_file) {
  app.add_option("--log-level", flags.log_level,
                 "trace, debug, info, warn, error, critical or off (default: $TUNEFARM_LOG_LEVEL or info)");
  if (with_config_file) {
    app.set_config("--config", "", "TOML file with default values for these flags (keys are the flag names)");
  }
}

bool parse_command_line(CLI::App& app, int argc, char** argv, int& exit_code) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    exit_code = 0;
    return false;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    exit_code = 0;
    return false;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    exit_code = 0;
    return false;
  } catch (const CLI::ParseError& e) {
    std::cerr << app.get_name() << ": " << e.what() << " (see --help)\n";
    exit_code = 2;
    return false;
  }
  return true;
}

}  // namespace tunefarm
