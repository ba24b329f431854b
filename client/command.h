// tune-client's command dispatcher: each command group (devices, and later jobs, records, ...)
// lives in its own file and registers its sub-commands here; main() parses and runs the one chosen.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace grpc {
class Channel;
class ChannelCredentials;
}  // namespace grpc

namespace tunefarm::client {

// Flags every command sees.
struct GlobalFlags {
  std::string server = "127.0.0.1:9191";
  std::string tracker = "127.0.0.1:9190";
  // Sent to tunerd as "authorization: Bearer <token>" on every call; never to the tracker.
  std::string token;
  // Sent to the tracker the same way, for listing the farm when its tokens are on.
  std::string tracker_token;
};

struct Command {
  CLI::App* app;          // The sub-command; parsed() tells whether it was chosen.
  std::function<int()> run;  // Returns the exit code; on failure prints one line to stderr first.
};

using Commands = std::vector<Command>;

// Command groups, one file each.
void add_devices_commands(CLI::App& app, const GlobalFlags& flags, Commands& commands);
void add_jobs_commands(CLI::App& app, const GlobalFlags& flags, Commands& commands);
void add_records_commands(CLI::App& app, const GlobalFlags& flags, Commands& commands);
void add_models_commands(CLI::App& app, const GlobalFlags& flags, Commands& commands);
void add_build_commands(CLI::App& app, const GlobalFlags& flags, Commands& commands);

// Set once by main() after parsing: how dial() secures channels, and which token each address gets.
void configure_dialing(std::shared_ptr<grpc::ChannelCredentials> security, const GlobalFlags& flags);

// A channel to `address` for one short command; calls to the tunerd named by --server carry the
// token given with --token or $TUNEFARM_TOKEN.
std::shared_ptr<grpc::Channel> dial(const std::string& address);

// Prints "tune-client: <message>" to stderr (and {"error": message} to stdout when the command
// line asked for --json) and returns 1, for a command's failure path.
int fail(const std::string& message);
extern bool json_errors;

}  // namespace tunefarm::client
