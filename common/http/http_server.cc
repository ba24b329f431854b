#include "common/http/http_server.h"

#include <sys/socket.h>

#include <atomic>
#include <exception>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
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

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  std::map<std::string, HttpHandler> routes;
  std::unique_ptr<httplib::Server> server;
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
  if (impl_->thread.joinable()) impl_->thread.join();
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::start(HttpServerOptions options,
                                                        std::map<std::string, HttpHandler> routes) {
  options.listen = normalize_listen_address(options.listen);
  TF_ASSIGN_OR_RETURN(HostPort where, split_listen(options.listen));
  auto impl = std::make_unique<Impl>();
  if (options.tls_cert.empty() != options.tls_key.empty())
    return invalid_argument(fmt::format("{} over TLS needs both a certificate and its key", options.name));
  if (!options.tls_cert.empty()) {
    // Read first for a message that names the file; the server reads them again itself.
    TF_RETURN_IF_ERROR(read_pem(options.tls_cert, "TLS certificate").status());
    TF_RETURN_IF_ERROR(read_pem(options.tls_key, "TLS key").status());
    auto tls = std::make_unique<httplib::SSLServer>(options.tls_cert.c_str(), options.tls_key.c_str());
    if (!tls->is_valid())
      return invalid_argument(fmt::format("{}: the TLS certificate {} and key {} do not make a TLS server (a key that "
                                          "does not match, or not PEM?)",
                                          options.name, options.tls_cert, options.tls_key));
    impl->server = std::move(tls);
  } else {
    impl->server = std::make_unique<httplib::Server>();
  }
  httplib::Server& server = *impl->server;
  // Never SO_REUSEPORT (httplib's default): two daemons on one port would each get some requests.
  server.set_socket_options([](int fd) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  });
  server.set_payload_max_length(64 << 10);
  server.set_read_timeout(std::chrono::seconds(10));
  server.set_write_timeout(std::chrono::seconds(10));
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
  impl->thread = std::thread([self] { self->server->listen_after_bind(); });
  std::unique_ptr<HttpServer> out(new HttpServer(std::move(impl)));
  out->port_ = port;
  out->address_ = fmt::format("{}:{}", where.host.find(':') != std::string::npos ? "[" + where.host + "]" : where.host, port);
  return out;
}

}  // namespace tunefarm
