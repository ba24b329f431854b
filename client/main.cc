// tune-client: the command line for people and scripts (README.md, "Command line").
#include <algorithm>
#include <map>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "client/command.h"
#include "common/credentials.h"
#include "common/flags.h"
#include "common/logging.h"

namespace tunefarm::client {
namespace {

// One process runs one command, so main() sets these once after parsing: which token goes to
// which address (tunerd's and the tracker's are different secrets).
std::map<std::string, std::string> tokens_by_address;
std::shared_ptr<grpc::ChannelCredentials> channel_security;

// Adds the bearer token to every call's initial metadata. An interceptor rather than call
// credentials, which gRPC sends only over TLS channels.
class BearerToken : public grpc::experimental::Interceptor {
 public:
  explicit BearerToken(const std::string& token) : header_("Bearer " + token) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA))
      methods->GetSendInitialMetadata()->insert({"authorization", header_});
    methods->Proceed();
  }

 private:
  std::string header_;
};

class BearerTokenFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new BearerToken(token_);
  }

 private:
  std::string token_;
};

}  // namespace

std::shared_ptr<grpc::Channel> dial(const std::string& address) {
  auto security = channel_security ? channel_security : grpc::InsecureChannelCredentials();
  auto token = tokens_by_address.find(address);
  if (token == tokens_by_address.end() || token->second.empty()) return grpc::CreateChannel(address, security);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<BearerTokenFactory>(token->second));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, security, grpc::ChannelArguments(),
                                                                 std::move(interceptors));
}

bool json_errors = false;

int fail(const std::string& message) {
  fmt::print(stderr, "tune-client: {}\n", message);
  // A script that asked for JSON reads its stdout: the failure comes as a JSON object there too.
  if (json_errors) fmt::print("{}\n", nlohmann::json{{"error", message}}.dump());
  return 1;
}

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
  client::add_devices_commands(app, flags, commands);
  for (int i = 1; i < argc; ++i) client::json_errors |= std::string_view(argv[i]) == "--json";
  if (std::string word = client::command_word(app, argc, argv); !word.empty()) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), word) == names.end())
      return client::fail(fmt::format("unknown command '{}' (commands: {})", word, fmt::join(names, ", ")));
  }
  int exit_code = 0;
  if (!parse_command_line(app, argc, argv, exit_code)) return exit_code;
  if (Status s = setup_logging("tune-client", common.log_level.empty() ? "warn" : common.log_level); !s.ok())
    return client::fail(s.message());
  auto security = channel_credentials(tls);
  if (!security.ok()) return client::fail(security.status().message());
  client::channel_security = *security;
  client::tokens_by_address[flags.tracker] = flags.tracker_token;
  client::tokens_by_address[flags.server] = flags.token;
  for (auto& command : commands)
    if (command.app->parsed()) return command.run();
  return client::fail("no command given (see --help)");
}
