#include "common/flags.h"

#include <filesystem>
#include <iostream>
#include <set>
#include <string_view>

#define TOML_EXCEPTIONS 0
#include <fmt/format.h>
#include <toml++/toml.h>

namespace tunefarm {

void add_common_flags(CLI::App& app, CommonFlags& flags, bool with_config_file) {
  app.add_option("--log-level", flags.log_level,
                 "trace, debug, info, warn, error, critical or off (default: $TUNEFARM_LOG_LEVEL or info)");
  if (with_config_file) {
    app.set_config("--config", "", "TOML file with default values for these flags (keys are the flag names)");
  }
}

namespace {

// The file named by --config FILE or --config=FILE, if any.
std::string config_path(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--config" && i + 1 < argc) return argv[i + 1];
    if (arg.starts_with("--config=")) return std::string(arg.substr(9));
  }
  return {};
}

}  // namespace

Status check_config_file(const CLI::App& app, const std::string& path) {
  auto parsed = toml::parse_file(path);
  if (!parsed) {
    const auto& e = parsed.error();
    return invalid_argument(fmt::format("{}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column,
                                        e.description()));
  }
  std::set<std::string> known;
  for (const CLI::Option* option : app.get_options())
    for (const std::string& name : option->get_lnames()) known.insert(name);
  known.erase("config");
  for (auto&& [key, value] : parsed.table()) {
    std::string name(key.str());
    auto where = fmt::format("{}:{}", path, key.source().begin.line);
    if (value.is_table() || value.is_array_of_tables())
      return invalid_argument(fmt::format("{}: [{}]: sections are not read; write the flags' names at the top level",
                                          where, name));
    if (known.count(name)) continue;
    std::string dashed = name;
    for (char& c : dashed)
      if (c == '_') c = '-';
    if (dashed != name && known.count(dashed))
      return invalid_argument(fmt::format("{}: unknown key \"{}\" (did you mean \"{}\"?)", where, name, dashed));
    return invalid_argument(fmt::format("{}: unknown key \"{}\" (keys are the long flag names; see --help)", where,
                                        name));
  }
  return Status::ok_status();
}

bool parse_command_line(CLI::App& app, int argc, char** argv, int& exit_code) {
  // CLI11 reads config files leniently (unknown keys and sections are skipped, a broken string
  // becomes a value), so the file is checked strictly before CLI11 reads it.
  if (std::string path = config_path(argc, argv); !path.empty()) {
    if (Status s = check_config_file(app, path); !s.ok()) {
      std::string program = app.get_name().empty() ? std::filesystem::path(argv[0]).filename().string() : app.get_name();
      std::cerr << program << ": " << s.message() << "\n";
      exit_code = 2;
      return false;
    }
  }
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
