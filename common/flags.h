// Command-line and config-file handling shared by the daemons and tools: every program gets
// --log-level and, for daemons, --config FILE (TOML; keys are the long flag names, and flags given
// on the command line win over the file).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/status.h"

namespace tunefarm {

struct CommonFlags {
  std::string log_level;
  std::string log_format = "text";
};

// Adds --log-level and --log-format (text, or json for log shippers); with `with_config_file`,
// also --config (a TOML file) and --check-config (validate the file and flags, then exit).
void add_common_flags(CLI::App& app, CommonFlags& flags, bool with_config_file);

// Adds a secret (a token) as `--NAME`, readable from the --config file, from $ENV, or from the file
// given with `--NAME-file` (one token per line; several only where the option repeats). The secret
// itself is refused on the command line, where every process of the host can read it
// (/proc/PID/cmdline). Returns the --NAME option.
CLI::Option* add_secret_option(CLI::App& app, const std::string& name, std::string& value, const std::string& env,
                               const std::string& help);
CLI::Option* add_secret_option(CLI::App& app, const std::string& name, std::vector<std::string>& values,
                               const std::string& env, const std::string& help);

// Checks a TOML config file against the app's flags: a syntax error, a section or a key that names
// no long flag is an error naming the file, the line and the key.
Status check_config_file(const CLI::App& app, const std::string& path);

// Parses argv; a --config file is checked with check_config_file first. On --help prints help and returns 0 through `exit_code`; on a bad command line
// prints one line naming the problem and returns 2; on --check-config that passed, says so and
// returns 0. Returns true when the program should run.
bool parse_command_line(CLI::App& app, int argc, char** argv, int& exit_code);

}  // namespace tunefarm
