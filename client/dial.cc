// How tune-client reaches the services: TLS from the command line, the bearer token that
// belongs to each address, and replicas: --server a:9191,b:9191 is one channel over every address
// of every replica, which gRPC's pick_first policy uses in order, moving to the next when one goes
// away (a DNS name with several addresses fails over the same way by itself).
#include <netdb.h>
#include <sys/socket.h>

#include <map>

#include <fmt/format.h>
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

// "ipv4:A:P,B:P" (or ipv6:) for every address of each "host:port" of `list`; empty when a host
// does not resolve or the families mix (gRPC's address lists take one).
std::string replica_target(const std::string& list) {
  std::string v4, v6;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string entry = list.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    size_t colon = entry.rfind(':');
    if (colon == std::string::npos) return "";
    std::string host = entry.substr(0, colon), port = entry.substr(colon + 1);
    if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return "";
    for (addrinfo* a = found; a; a = a->ai_next) {
      char text[NI_MAXHOST];
      if (::getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST) != 0) continue;
      if (a->ai_family == AF_INET) v4 += fmt::format("{}{}:{}", v4.empty() ? "" : ",", text, port);
      if (a->ai_family == AF_INET6) v6 += fmt::format("{}[{}]:{}", v6.empty() ? "" : ",", text, port);
    }
    ::freeaddrinfo(found);
  }
  if (!v4.empty() && !v6.empty()) return "";
  return v4.empty() ? (v6.empty() ? "" : "ipv6:" + v6) : "ipv4:" + v4;
}

}  // namespace

void configure_dialing(std::shared_ptr<grpc::ChannelCredentials> security, const GlobalFlags& flags) {
  channel_security = std::move(security);
  tokens_by_address[flags.tracker] = flags.tracker_token;
  tokens_by_address[flags.server] = flags.token;
}

std::shared_ptr<grpc::Channel> dial(const std::string& address) {
  auto security = channel_security ? channel_security : grpc::InsecureChannelCredentials();
  std::string target = address;
  grpc::ChannelArguments args;
  if (address.find(',') != std::string::npos) {
    // An address that does not resolve is left to gRPC, whose error names it.
    if (std::string replicas = replica_target(address); !replicas.empty()) target = replicas;
    // TLS checks every replica's certificate against the first name given (a name they share, such
    // as a Kubernetes Service's).
    std::string first = address.substr(0, address.find(','));
    args.SetSslTargetNameOverride(first.substr(0, first.rfind(':')));
  }
  auto token = tokens_by_address.find(address);
  if (token == tokens_by_address.end() || token->second.empty()) return grpc::CreateCustomChannel(target, security, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<BearerTokenFactory>(token->second));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, security, args, std::move(interceptors));
}

}  // namespace tunefarm::client
