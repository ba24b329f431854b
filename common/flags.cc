#include "common/flags.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string_view>

#define TOML_EXCEPTIONS 0
#include <fmt/format.h>
#include <toml++/toml.h>

namespace tunefarm {

namespace {
constexpr const char* kCheckConfigFlag = "--check-config";
}  // namespace

void add_common_flags(CLI::App& app, CommonFlags& flags, bool with_config_file) {
  app.add_option("--log-level", flags.log_level,
                 "trace, debug, info, warn, error, critical or off (default: $TUNEFARM_LOG_LEVEL or info)");
  app.add_option("--log-format", flags.log_format, "text (for people) or json (one object per line, for log shippers)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  if (with_config_file) {
    app.set_config("--config", "", "TOML file with default values for these flags (keys are the flag names)");
    // Installers and deployment tests validate a config where the daemon is not to start (a package
    // upgrade, a Kubernetes ConfigMap checked offline).
    app.add_flag(kCheckConfigFlag)->description(
        "Check the --config file and the command line (keys, values, secret files), then exit: 0 when the daemon "
        "would accept them");
  }
}

namespace {

constexpr const char* kSecretsGroup = "Secrets (from --config, the environment or a file; never the command line)";

// The tokens of a secret file: its non-empty lines, without surrounding blanks.
std::vector<std::string> read_secret_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw CLI::ValidationError(path, "cannot read the secret file");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find_first_not_of(" \t\r");
    size_t b = line.find_last_not_of(" \t\r");
    if (a != std::string::npos) out.push_back(line.substr(a, b - a + 1));
  }
  if (out.empty()) throw CLI::ValidationError(path, "the secret file holds no token");
  return out;
}

// Whether argv gives option `name` (--name or --name=value) itself.
bool on_command_line(int argc, char** argv, const std::string& name) {
  std::string flag = "--" + name;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == flag || arg.starts_with(flag + "=")) return true;
  }
  return false;
}

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

CLI::Option* add_secret_option(CLI::App& app, const std::string& name, std::string& value, const std::string& env,
                               const std::string& help) {
  app.add_option("--" + name + "-file")
      ->description(help + ": read from this file")
      ->group(kSecretsGroup)
      ->each([&value, name](const std::string& path) {
        auto tokens = read_secret_file(path);
        if (tokens.size() > 1) throw CLI::ValidationError(path, "holds more than one token for --" + name);
        value = tokens[0];
      });
  return app.add_option("--" + name, value, help)->envname(env)->group(kSecretsGroup);
}

CLI::Option* add_secret_option(CLI::App& app, const std::string& name, std::vector<std::string>& values,
                               const std::string& env, const std::string& help) {
  app.add_option("--" + name + "-file")
      ->description(help + ": read from this file, one per line")
      ->group(kSecretsGroup)
      ->each([&values](const std::string& path) {
        for (auto& t : read_secret_file(path)) values.push_back(std::move(t));
      });
  return app.add_option("--" + name, values, help)->envname(env)->group(kSecretsGroup);
}

Status check_config_file(const CLI::App& app, const std::string& path) {
  // toml++ reports an unreadable file as "File could not be opened for reading" at line 0: say
  // which file and why (a wrong path, a permission the daemon's user lacks).
  if (std::FILE* file = std::fopen(path.c_str(), "r"))
    std::fclose(file);
  else
    return not_found(fmt::format("cannot read the --config file {}: {}", path, std::strerror(errno)));
  auto parsed = toml::parse_file(path);
  if (!parsed) {
    const auto& e = parsed.error();
    return invalid_argument(fmt::format("{}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column,
                                        e.description()));
  }
  std::set<std::string> known;
  for (const CLI::Option* option : app.get_options())
    for (const std::string& name : option->get_lnames()) known.insert(name);
  // Neither belongs in the file: one names it, the other would stop the daemon at every start.
  known.erase("config");
  known.erase(std::string(kCheckConfigFlag).substr(2));
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

namespace {

// Where a value that CLI11 refused came from, when it came from the --config file: CLI11 names
// the flag ("--max-queued-jobs: Value lots not in range ...") but not the file and line.
std::string config_source(int argc, char** argv, const std::string& error) {
  std::string path = config_path(argc, argv);
  if (path.empty() || !error.starts_with("--")) return "";
  std::string name = error.substr(2, error.find(':') == std::string::npos ? 0 : error.find(':') - 2);
  if (name.empty() || on_command_line(argc, argv, name)) return "";
  auto parsed = toml::parse_file(path);
  if (!parsed) return "";
  for (auto&& [key, value] : parsed.table())
    if (key.str() == name) return fmt::format(" (at {}:{}, key \"{}\")", path, key.source().begin.line, name);
  return "";
}

}  // namespace

bool parse_command_line(CLI::App& app, int argc, char** argv, int& exit_code) {
  std::string program = app.get_name().empty() ? std::filesystem::path(argv[0]).filename().string() : app.get_name();
  // CLI11 reads config files leniently (unknown keys and sections are skipped, a broken string
  // becomes a value), so the file is checked strictly before CLI11 reads it.
  if (std::string path = config_path(argc, argv); !path.empty()) {
    if (Status s = check_config_file(app, path); !s.ok()) {
      std::cerr << program << ": " << s.message() << "\n";
      exit_code = 2;
      return false;
    }
  }
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_group() != kSecretsGroup) continue;
    for (const std::string& name : option->get_lnames()) {
      if (name.ends_with("-file") || !on_command_line(argc, argv, name)) continue;
      std::cerr << program << ": --" << name << " on the command line is readable by every process of this host; give it in "
                << "the --config file, as $" << option->get_envname() << " or with --" << name << "-file\n";
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
    std::cerr << app.get_name() << ": " << e.what() << config_source(argc, argv, e.what()) << " (see --help)\n";
    exit_code = 2;
    return false;
  }
  if (const CLI::Option* check = app.get_option_no_throw(kCheckConfigFlag); check && check->count() > 0) {
    std::cout << program << ": the configuration is valid\n";
    exit_code = 0;
    return false;
  }
  return true;
}

}  // namespace tunefarm
