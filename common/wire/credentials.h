// Credentials of the farm's gRPC channels, shared by every program: tokens (agent, tuner, client
// and read-only) that daemons check, and TLS from PEM files (server certificates, and client
// certificates for mutual TLS between agents and trackerd; deploy/make-certs.sh makes them for a
// lab). Header-only so that the daemons, the agent and tune-client share it without another
// library; only their main files and the services include it.
#pragma once

#include <cstddef>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "common/status.h"

namespace tunefarm {

// Compares a presented token with a configured one without an early exit, so that the time taken
// does not tell how much of a guess was right.
inline bool same_secret(std::string_view presented, std::string_view expected) {
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < presented.size(); ++i)
    diff |= static_cast<unsigned char>(presented[i] ^ (expected.empty() ? 0 : expected[i % expected.size()]));
  return diff == 0 && !expected.empty();
}

inline bool any_secret(const std::vector<std::string>& expected, std::string_view presented) {
  bool found = false;
  for (const auto& e : expected) found |= same_secret(presented, e);
  return found;
}

// The token of an "authorization" metadata value "Bearer <token>"; empty when it has another form.
inline std::string_view bearer_token(std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) return {};
  return authorization.substr(kBearer.size());
}

// Presents `token` on a call as "authorization: Bearer <token>"; nothing when it is empty.
inline void add_bearer(grpc::ClientContext& context, const std::string& token) {
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
}

// Which calls a daemon's gRPC server lets in at all, decided on a call's metadata before its
// request is read: one that presents none of `tokens` as "authorization: Bearer <token>" is
// UNAUTHENTICATED with `missing` (no token) or `unknown` (another). Empty `tokens`: every call.
// What each token may then do is the service's own check.
struct CallGate {
  std::vector<std::string> tokens;
  std::string missing = "this daemon requires a token";
  std::string unknown = "the token is not one this daemon knows";
};

// What to check when a channel to `address` could not be used, from gRPC's `message` (empty when
// all that is known is that it never connected): a connection closed while it was set up is a TLS
// mismatch more often than a server that is away (gRPC says only "Socket closed" or names the
// handshake); a refused one is a server that is not there. `ca_flag` is the dialer's flag for the
// CA. Starts with "; ", to follow the message.
inline std::string unreachable_hint(const std::string& message, const std::string& ca_flag) {
  auto has = [&](const char* text) { return message.find(text) != std::string::npos; };
  if (has("Socket closed") || has("handshake") || has("SSL") || has("certificate"))
    return "; if it serves TLS, give " + ca_flag +
           " with the CA that signed its certificate (a wrong CA fails so too); if it does not, leave " + ca_flag +
           " out";
  if (message.empty())
    return "; is it running, and is that its --listen address? (one that serves TLS needs " + ca_flag + ")";
  if (has("onnect") || has("refused")) return "; is it running, and is that its --listen address?";
  return "";
}

// A daemon's side of TLS. No cert means plaintext. With client_ca, clients must present a
// certificate signed by it (mutual TLS, for agents).
struct TlsServerFiles {
  std::string cert;
  std::string key;
  std::string client_ca;
  bool enabled() const { return !cert.empty(); }
};

// A dialer's side. No ca means plaintext; cert and key add a client certificate.
struct TlsClientFiles {
  std::string ca;
  std::string cert;
  std::string key;
  bool enabled() const { return !ca.empty(); }
};

inline StatusOr<std::string> read_pem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(std::string("cannot read the ") + what + " file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos)
    return invalid_argument(std::string("the ") + what + " file '" + path + "' holds no PEM block");
  return text.str();
}

inline StatusOr<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials(const TlsClientFiles& files) {
  if (!files.enabled()) {
    if (!files.cert.empty() || !files.key.empty())
      return invalid_argument("a client certificate was given without the CA to check the server by (--tls-ca)");
    return grpc::InsecureChannelCredentials();
  }
  if (files.cert.empty() != files.key.empty())
    return invalid_argument("a client certificate needs both --tls-cert and --tls-key");
  grpc::SslCredentialsOptions options;
  TF_ASSIGN_OR_RETURN(options.pem_root_certs, read_pem(files.ca, "CA"));
  if (!files.cert.empty()) {
    TF_ASSIGN_OR_RETURN(options.pem_cert_chain, read_pem(files.cert, "client certificate"));
    TF_ASSIGN_OR_RETURN(options.pem_private_key, read_pem(files.key, "client key"));
  }
  return grpc::SslCredentials(options);
}

}  // namespace tunefarm
