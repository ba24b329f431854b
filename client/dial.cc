// How tune-client reaches the services: TLS from the command line, and the bearer token that
// belongs to each address.
#include <map>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>

#include "client/command.h"

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

void configure_dialing(std::shared_ptr<grpc::ChannelCredentials> security, const GlobalFlags& flags) {
  channel_security = std::move(security);
  tokens_by_address[flags.tracker] = flags.tracker_token;
  tokens_by_address[flags.server] = flags.token;
}

std::shared_ptr<grpc::Channel> dial(const std::string& address) {
  auto security = channel_security ? channel_security : grpc::InsecureChannelCredentials();
  auto token = tokens_by_address.find(address);
  if (token == tokens_by_address.end() || token->second.empty()) return grpc::CreateChannel(address, security);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<BearerTokenFactory>(token->second));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, security, grpc::ChannelArguments(),
                                                                 std::move(interceptors));
}

}  // namespace tunefarm::client
