#include "common/daemon/daemon.h"

#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "common/address.h"
#include "common/wire/credentials.h"
#include "common/flags.h"
#include "common/logging.h"

namespace tunefarm {

int run_daemon(std::string_view program, const CommonFlags& common, const std::function<DaemonExit()>& daemon) {
  DaemonExit exit;
  if (Status s = setup_logging(program, common.log_level, common.log_format); !s.ok())
    exit = DaemonExit::configuration(s);
  else
    exit = daemon();
  if (exit.code != 0) fmt::print(stderr, "{}: {}\n", program, exit.message);
  return exit.code;
}

StatusOr<int> listen_port(const std::string& listen) {
  size_t colon = listen.rfind(':');
  std::string port = colon == std::string::npos ? "" : listen.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) > 65535)
    return invalid_argument(fmt::format("'{}' is not an address to listen on: give host:port (127.0.0.1:9191, "
                                        "0.0.0.0:9191, [::1]:9191)",
                                        listen));
  return std::stoi(port);
}

Status check_exposure(const Exposure& e) {
  TF_RETURN_IF_ERROR(listen_port(e.listen).status());
  if (is_loopback_address(e.listen) || (e.tls && e.tokens)) return Status::ok_status();
  if (!e.insecure)
    return failed_precondition(fmt::format("refusing to serve {} beyond loopback without TLS ({}) and tokens ({}), or "
                                           "--insecure",
                                           e.listen, e.tls_flags, e.token_flags));
  spdlog::warn("INSECURE: serving {} beyond loopback{}{} (--insecure): {}", e.listen, e.tls ? "" : " WITHOUT TLS",
               e.tokens ? "" : " WITHOUT tokens", e.risk);
  return Status::ok_status();
}

namespace {

// gRPC's core credentials with a metadata processor of our own. (grpc++ offers processors on TLS
// credentials only, and asserts on InsecureServerCredentials; the core takes one on either.)
class GatedServerCredentials final : public grpc::ServerCredentials {
 public:
  // Takes `credentials`; `gate` with no tokens sets no processor.
  GatedServerCredentials(grpc_server_credentials* credentials, CallGate gate) : credentials_(credentials) {
    if (gate.tokens.empty()) return;
    grpc_auth_metadata_processor processor{&check_call, &destroy_gate, new CallGate(std::move(gate))};
    grpc_server_credentials_set_auth_metadata_processor(credentials_, processor);
  }
  ~GatedServerCredentials() override { grpc_server_credentials_release(credentials_); }

  // The gate is fixed at construction; grpc++'s own processors are not taken here.
  void SetAuthMetadataProcessor(const std::shared_ptr<grpc::AuthMetadataProcessor>&) override { std::abort(); }

 private:
  int AddPortToServer(const std::string& address, grpc_server* server) override {
    return grpc_server_add_http2_port(server, address.c_str(), credentials_);
  }

  static void check_call(void* state, grpc_auth_context*, const grpc_metadata* metadata, size_t count,
                         grpc_process_auth_metadata_done_cb done, void* call) {
    const CallGate& gate = *static_cast<const CallGate*>(state);
    std::string_view token;
    for (size_t i = 0; i < count; ++i) {
      if (grpc_slice_str_cmp(metadata[i].key, "authorization") != 0) continue;
      token = bearer_token({reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(metadata[i].value)),
                            GRPC_SLICE_LENGTH(metadata[i].value)});
      break;
    }
    if (!token.empty() && any_secret(gate.tokens, token))
      done(call, nullptr, 0, nullptr, 0, GRPC_STATUS_OK, nullptr);
    else
      done(call, nullptr, 0, nullptr, 0, GRPC_STATUS_UNAUTHENTICATED,
           (token.empty() ? gate.missing : gate.unknown).c_str());
  }
  static void destroy_gate(void* state) { delete static_cast<CallGate*>(state); }

  grpc_server_credentials* credentials_;
};

StatusOr<std::shared_ptr<grpc::ServerCredentials>> server_credentials(const TlsServerFiles& files, CallGate gate) {
  if (!files.enabled()) {
    if (!files.key.empty() || !files.client_ca.empty())
      return invalid_argument("a TLS key or client CA was given without a certificate (--tls-cert)");
    return std::shared_ptr<grpc::ServerCredentials>(
        std::make_shared<GatedServerCredentials>(grpc_insecure_server_credentials_create(), std::move(gate)));
  }
  if (files.key.empty()) return invalid_argument("--tls-cert needs its private key (--tls-key)");
  TF_ASSIGN_OR_RETURN(std::string cert, read_pem(files.cert, "TLS certificate"));
  TF_ASSIGN_OR_RETURN(std::string key, read_pem(files.key, "TLS key"));
  std::string client_ca;
  if (!files.client_ca.empty()) {
    TF_ASSIGN_OR_RETURN(client_ca, read_pem(files.client_ca, "client CA"));
  }
  grpc_ssl_pem_key_cert_pair pair{key.c_str(), cert.c_str()};
  grpc_server_credentials* credentials = grpc_ssl_server_credentials_create_ex(
      client_ca.empty() ? nullptr : client_ca.c_str(), &pair, 1,
      client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                        : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY,
      nullptr);
  if (!credentials) return invalid_argument(fmt::format("the TLS certificate {} and key {} are not usable", files.cert, files.key));
  return std::shared_ptr<grpc::ServerCredentials>(std::make_shared<GatedServerCredentials>(credentials, std::move(gate)));
}

}  // namespace

StatusOr<std::shared_ptr<grpc::ServerCredentials>> serving_credentials(const Exposure& exposure,
                                                                        const TlsServerFiles& tls, const CallGate& gate) {
  TF_RETURN_IF_ERROR(check_exposure(exposure));
  return server_credentials(tls, gate);
}

StopSignals::StopSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  // A write past the file-size limit is then an error (EFBIG) that the daemon reports and waits
  // out like a full disk, instead of a signal that kills it.
  signal(SIGXFSZ, SIG_IGN);
}

int StopSignals::wait() {
  int sig = 0;
  sigwait(&set_, &sig);
  return sig;
}

std::string listen_error(const std::string& listen) {
  if (listen.starts_with("unix:")) return {};
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return {};
  std::string host = listen.substr(0, colon);
  std::string port = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found) != 0 || !found) return {};
  std::string why;
  int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, found->ai_addr, found->ai_addrlen) != 0)
      why = errno == EADDRINUSE ? "address already in use (is another daemon running there?)" : std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(found);
  return why;
}

StatusOr<std::unique_ptr<grpc::Server>> start_server(grpc::ServerBuilder& builder, const std::string& listen,
                                                     std::shared_ptr<grpc::ServerCredentials> credentials) {
  int port = 0;
  builder.AddListeningPort(listen, std::move(credentials), &port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server && port != 0) return server;
  if (server) server->Shutdown();
  std::string why = listen_error(listen);
  return unavailable(fmt::format("cannot listen on {}: {}", listen, why.empty() ? "malformed address?" : why));
}

StatusOr<std::unique_ptr<DirectoryLock>> DirectoryLock::acquire(const std::string& directory) {
  std::string path = (std::filesystem::path(directory) / "LOCK").string();
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return unavailable(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char buf[32] = {};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    if (err != EWOULDBLOCK) return unavailable(fmt::format("cannot lock {}: {}", path, std::strerror(err)));
    std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return failed_precondition(
        fmt::format("data directory {} is in use by another process (pid {}); one tunerd owns a data directory",
                    directory, holder));
  }
  std::string pid = fmt::format("{}\n", getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size()))
    spdlog::warn("cannot write the owner's pid into {}", path);
  return std::unique_ptr<DirectoryLock>(new DirectoryLock(fd));
}

DirectoryLock::~DirectoryLock() { close(fd_); }

}  // namespace tunefarm
