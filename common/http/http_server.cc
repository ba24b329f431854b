#include "common/http/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include "common/wire/credentials.h"
#include "common/daemon/daemon.h"
#include "common/logging.h"

namespace tunefarm {

std::string HttpRequest::param(const std::string& name, const std::string& fallback) const {
  auto it = query.find(name);
  return it == query.end() ? fallback : it->second;
}

HttpResponse HttpResponse::json(std::string body, int status) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(body);
  return r;
}

HttpResponse HttpResponse::error(int status, const std::string& message) {
  return json(fmt::format("{{\"error\":{}}}\n", json_string(message)), status);
}

std::string normalize_listen_address(const std::string& listen) {
  if (!listen.empty() && listen.find_first_not_of("0123456789") == std::string::npos) return "127.0.0.1:" + listen;
  return listen;
}

namespace {

// The value of a base64 text, or nothing when it is not base64.
std::optional<std::string> base64_decode(std::string_view text) {
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') break;
    else return std::nullopt;
    bits = (bits << 6) | static_cast<uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out += static_cast<char>((bits >> count) & 0xff);
    }
  }
  return out;
}

// The token a request presents: a bearer token, or the password of basic authentication.
std::string presented_token(const httplib::Request& request) {
  std::string authorization = request.get_header_value("Authorization");
  if (std::string_view bearer = bearer_token(authorization); !bearer.empty()) return std::string(bearer);
  constexpr std::string_view kBasic = "Basic ";
  if (std::string_view(authorization).substr(0, kBasic.size()) != kBasic) return {};
  auto decoded = base64_decode(std::string_view(authorization).substr(kBasic.size()));
  if (!decoded) return {};
  size_t colon = decoded->find(':');
  return colon == std::string::npos ? std::string() : decoded->substr(colon + 1);
}

struct HostPort {
  std::string host;
  int port = -1;
};

StatusOr<HostPort> split_listen(const std::string& listen) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size())
    return invalid_argument(fmt::format("'{}' is not an address to listen on (host:port, or a port)", listen));
  HostPort out;
  out.host = listen.substr(0, colon);
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2);
  if (out.host.empty()) out.host = "0.0.0.0";
  std::string port = listen.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535)
    return invalid_argument(fmt::format("'{}' has no valid port (0..65535)", listen));
  out.port = std::stoi(port);
  return out;
}

void write(httplib::Response& out, const HttpResponse& in) {
  out.status = in.status;
  for (const auto& [name, value] : in.headers) out.set_header(name, value);
  // Nothing here is meant to be framed or sniffed into another type.
  out.set_header("X-Content-Type-Options", "nosniff");
  out.set_header("Cache-Control", "no-store");
  out.set_content(in.body, in.content_type);
}


using Clock = std::chrono::steady_clock;

// A connection's bytes, plain or TLS, where every wait ends at the connection's deadline: a
// client that trickles a byte at a time gets no more time in all than one that sends nothing.
// (cpp-httplib's own timeouts bound each wait only, so they reset with every byte.)
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(int fd, SSL* ssl, Clock::time_point deadline) : fd_(fd), ssl_(ssl), deadline_(deadline) {}

  // Waits until the socket is ready for `events`; false at the deadline or on an error.
  bool wait(short events) const {
    for (;;) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd_, events, 0};
      int ready = poll(&p, 1, static_cast<int>(left));
      if (ready < 0 && errno == EINTR) continue;
      return ready > 0 && !(p.revents & (POLLERR | POLLNVAL));
    }
  }

  // Completes the TLS handshake by the deadline.
  bool accept_tls() {
    for (;;) {
      int done = SSL_accept(ssl_);
      if (done == 1) return true;
      if (!wait_for_tls(done)) return false;
    }
  }

  bool is_readable() const override { return (ssl_ && SSL_pending(ssl_) > 0) || wait(POLLIN); }
  bool is_writable() const override { return wait(POLLOUT); }

  ssize_t read(char* data, size_t size) override {
    for (;;) {
      if (ssl_) {
        int n = SSL_read(ssl_, data, static_cast<int>(std::min<size_t>(size, INT_MAX)));
        if (n > 0) return n;
        if (SSL_get_error(ssl_, n) == SSL_ERROR_ZERO_RETURN) return 0;
        if (!wait_for_tls(n)) return -1;
        continue;
      }
      ssize_t n = recv(fd_, data, size, 0);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !wait(POLLIN)) return -1;
    }
  }

  ssize_t write(const char* data, size_t size) override {
    for (;;) {
      if (ssl_) {
        int n = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(size, INT_MAX)));
        if (n > 0) return n;
        if (!wait_for_tls(n)) return -1;
        continue;
      }
      ssize_t n = send(fd_, data, size, MSG_NOSIGNAL);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !wait(POLLOUT)) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(getsockname, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  // After a TLS call returned `result`: waits for what it needs; false when it failed for good.
  bool wait_for_tls(int result) const {
    switch (SSL_get_error(ssl_, result)) {
      case SSL_ERROR_WANT_READ: return wait(POLLIN);
      case SSL_ERROR_WANT_WRITE: return wait(POLLOUT);
      default: ERR_clear_error(); return false;
    }
  }

  void address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage where{};
    socklen_t length = sizeof where;
    ip.clear();
    port = -1;
    if (get(fd_, reinterpret_cast<sockaddr*>(&where), &length) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (where.ss_family == AF_INET) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&where);
      inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
      port = ntohs(v4->sin_port);
    } else if (where.ss_family == AF_INET6) {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&where);
      inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
      port = ntohs(v6->sin6_port);
    }
    ip = text;
  }

  int fd_;
  SSL* ssl_;
  Clock::time_point deadline_;
};

// cpp-httplib's task queue with `threads` threads and at most as many connections waiting for
// one; past that the accepting thread waits, and new connections wait in the kernel's backlog
// (no descriptor is spent on them).
class BoundedThreadPool : public httplib::TaskQueue {
 public:
  explicit BoundedThreadPool(size_t threads) : limit_(threads) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  }
  void enqueue(std::function<void()> task) override {
    std::unique_lock<std::mutex> lock(mutex_);
    room_.wait(lock, [&] { return tasks_.size() < limit_; });
    tasks_.push_back(std::move(task));
    ready_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      room_.notify_one();
      task();
    }
  }

  size_t limit_;
  std::mutex mutex_;
  std::condition_variable ready_, room_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

struct SslCtxFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

// A TLS context for the certificate chain and key files, or why not.
StatusOr<SslCtxPtr> make_tls_context(const HttpServerOptions& options) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) return internal_error(fmt::format("{}: cannot make a TLS context", options.name));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  // Writes go on where a partial one stopped (the stream above hands the rest again).
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), options.tls_cert.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx.get(), options.tls_key.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx.get()) != 1) {
    ERR_clear_error();
    return invalid_argument(fmt::format("{}: the TLS certificate {} and key {} do not make a TLS server (a key that "
                                        "does not match, or not PEM?)",
                                        options.name, options.tls_cert, options.tls_key));
  }
  return ctx;
}

// cpp-httplib's server with connections of our own making: each (TLS handshake included) under one
// deadline, one request each, and every one cut short when the server stops.
class GuardedServer : public httplib::Server {
 public:
  GuardedServer(SslCtxPtr tls, int max_connections, std::chrono::milliseconds deadline)
      : tls_(std::move(tls)), deadline_(deadline) {
    size_t threads = static_cast<size_t>(std::max(1, max_connections));
    new_task_queue = [threads] { return new BoundedThreadPool(threads); };
  }

  // cpp-httplib listens with a backlog of 5, too few for a burst of connections that arrive while
  // its thread is between accepts (those beyond it wait a second or more for the SYN's resend).
  void widen_backlog() { ::listen(svr_sock_, SOMAXCONN); }

  // Ends every connection at once (its thread returns) and refuses those still waiting.
  void stop_connections() {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (int fd : open_) shutdown(fd, SHUT_RDWR);
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    Clock::time_point deadline = Clock::now() + deadline_;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) {
        close(sock);
        return false;
      }
      open_.insert(sock);
    }
    fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) | O_NONBLOCK);
    bool served = false;
    SSL* ssl = nullptr;
    if (tls_) {
      ssl = SSL_new(tls_.get());
      if (ssl) SSL_set_fd(ssl, sock);
    }
    DeadlineStream stream(sock, ssl, deadline);
    if (!tls_ || (ssl && stream.accept_tls())) {
      bool closed = false;
      served = process_request(stream, /*close_connection=*/true, closed, [](httplib::Request&) {});
      if (ssl) SSL_shutdown(ssl);
    }
    if (ssl) SSL_free(ssl);
    ERR_clear_error();
    // Out of the set before the descriptor is closed, so that stop_connections never shuts down a
    // descriptor the process has since reused.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_.erase(sock);
    }
    shutdown(sock, SHUT_RDWR);
    close(sock);
    return served;
  }

  SslCtxPtr tls_;
  std::chrono::milliseconds deadline_;
  std::mutex mutex_;
  std::set<int> open_;
  bool stopping_ = false;
};

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  std::map<std::string, HttpHandler> routes;
  std::unique_ptr<GuardedServer> server;
  std::thread thread;

  HttpResponse route(const HttpRequest& request) const {
    auto exact = routes.find(request.path);
    if (exact != routes.end()) return exact->second(request);
    // The longest prefix route that holds the path.
    const HttpHandler* handler = nullptr;
    size_t longest = 0;
    for (const auto& [path, h] : routes) {
      if (path.size() < 2 || path.back() != '/' || path.size() <= longest) continue;
      if (request.path.compare(0, path.size(), path) == 0) {
        handler = &h;
        longest = path.size();
      }
    }
    if (!handler) return HttpResponse::error(404, fmt::format("no such page: {}", request.path));
    return (*handler)(request);
  }

  void serve(const httplib::Request& in, httplib::Response& out) const {
    if (!options.tokens.empty()) {
      std::string token = presented_token(in);
      if (!any_secret(options.tokens, token)) {
        HttpResponse refused = HttpResponse::error(
            401, token.empty() ? fmt::format("this endpoint requires {}: send \"Authorization: Bearer <token>\"",
                                             options.token_hint)
                               : "the token is not one this daemon knows");
        refused.headers.emplace_back("WWW-Authenticate", "Basic realm=\"tunefarm\", charset=\"UTF-8\"");
        write(out, refused);
        return;
      }
    }
    HttpRequest request;
    request.path = in.path;
    for (const auto& [name, value] : in.params) request.query.emplace(name, value);
    HttpResponse response;
    try {
      response = route(request);
    } catch (const std::exception& e) {
      spdlog::error("{}: GET {} failed: {}", options.name, in.path, e.what());
      response = HttpResponse::error(500, "internal error; the daemon's log has the details");
    }
    write(out, response);
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  impl_->server->stop();
  impl_->server->stop_connections();
  if (impl_->thread.joinable()) impl_->thread.join();
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::start(HttpServerOptions options,
                                                        std::map<std::string, HttpHandler> routes) {
  options.listen = normalize_listen_address(options.listen);
  TF_ASSIGN_OR_RETURN(HostPort where, split_listen(options.listen));
  auto impl = std::make_unique<Impl>();
  if (options.tls_cert.empty() != options.tls_key.empty())
    return invalid_argument(fmt::format("{} over TLS needs both a certificate and its key", options.name));
  SslCtxPtr tls;
  if (!options.tls_cert.empty()) {
    // Read first for a message that names the file.
    TF_RETURN_IF_ERROR(read_pem(options.tls_cert, "TLS certificate").status());
    TF_RETURN_IF_ERROR(read_pem(options.tls_key, "TLS key").status());
    TF_ASSIGN_OR_RETURN(tls, make_tls_context(options));
  }
  impl->server = std::make_unique<GuardedServer>(std::move(tls), options.max_connections, options.connection_deadline);
  httplib::Server& server = *impl->server;
  // Never SO_REUSEPORT (httplib's default): two daemons on one port would each get some requests.
  server.set_socket_options([](int fd) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  });
  server.set_payload_max_length(64 << 10);
  Impl* self = impl.get();
  server.Get(".*", [self](const httplib::Request& in, httplib::Response& out) { self->serve(in, out); });
  auto not_allowed = [](const httplib::Request& in, httplib::Response& out) {
    HttpResponse r = HttpResponse::error(405, fmt::format("{} is not allowed here; these pages only answer GET", in.method));
    r.headers.emplace_back("Allow", "GET, HEAD");
    write(out, r);
  };
  server.Post(".*", not_allowed);
  server.Put(".*", not_allowed);
  server.Patch(".*", not_allowed);
  server.Delete(".*", not_allowed);
  server.Options(".*", not_allowed);
  server.set_exception_handler([](const httplib::Request&, httplib::Response& out, std::exception_ptr) {
    write(out, HttpResponse::error(500, "internal error"));
  });
  impl->options = std::move(options);
  impl->routes = std::move(routes);

  int port = where.port;
  if (port == 0) {
    port = server.bind_to_any_port(where.host);
    if (port < 0) port = 0;
  } else if (!server.bind_to_port(where.host, port)) {
    port = 0;
  }
  if (port == 0) {
    std::string why = listen_error(impl->options.listen);
    return unavailable(fmt::format("{}: cannot listen on {}: {}", impl->options.name, impl->options.listen,
                                   why.empty() ? "malformed address?" : why));
  }
  impl->server->widen_backlog();
  impl->thread = std::thread([self] { self->server->listen_after_bind(); });
  std::unique_ptr<HttpServer> out(new HttpServer(std::move(impl)));
  out->port_ = port;
  out->address_ = fmt::format("{}:{}", where.host.find(':') != std::string::npos ? "[" + where.host + "]" : where.host, port);
  return out;
}

}  // namespace tunefarm
