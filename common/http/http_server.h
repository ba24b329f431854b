// A small HTTP(S) server for what daemons show beside their gRPC service: Prometheus metrics and
// tunerd's dashboard. GET only; every other method is 405. Routes are exact paths, or prefixes
// ending in '/' that take everything below them; any other path is 404. With tokens configured,
// every request must present one, as "Authorization: Bearer <token>" (Prometheus, scripts) or as
// the password of HTTP basic authentication (browsers ask for it), else 401. "/" is exact.
//
// Handlers return a response and never throw; one that does answers 500 and the server goes on.
// One request per connection, each connection (its TLS handshake included) under one deadline and
// at most max_connections served at once, so that slow clients cannot keep the others waiting.
// cpp-httplib's (heavy) header stays inside http_server.cc.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace tunefarm {

struct HttpRequest {
  std::string path;                              // Decoded, without the query.
  std::multimap<std::string, std::string> query;  // Decoded parameters.
  // The parameter's value, or `fallback` when absent.
  std::string param(const std::string& name, const std::string& fallback = {}) const;
  bool has_param(const std::string& name) const { return query.count(name) > 0; }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  static HttpResponse json(std::string body, int status = 200);
  // {"error": message} with a 4xx or 5xx status.
  static HttpResponse error(int status, const std::string& message);
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  // "host:port", "[::1]:port", or a bare port, which means 127.0.0.1.
  std::string listen;
  // PEM files; both or neither (plain HTTP).
  std::string tls_cert;
  std::string tls_key;
  // Accepted tokens; empty: no token is asked for.
  std::vector<std::string> tokens;
  // Says which token to present, in the 401 answer ("the read-only token").
  std::string token_hint = "a token";
  // For logs: "metrics", "dashboard".
  std::string name = "http";
  // Connections served at once; more wait (a few in a queue, the rest in the kernel's backlog).
  int max_connections = 64;
  // How long one connection may take in all: the TLS handshake, the request and the answer. It is
  // closed then however it trickles, so that slow clients cannot hold the server.
  std::chrono::milliseconds connection_deadline{10000};
};

// The address a bare port or "host:port" stands for ("9390" -> "127.0.0.1:9390").
std::string normalize_listen_address(const std::string& listen);

class HttpServer {
 public:
  // Binds and starts serving `routes` (path or prefix -> handler) on threads of its own. A taken
  // port says "address already in use"; unreadable TLS files name the file.
  static StatusOr<std::unique_ptr<HttpServer>> start(HttpServerOptions options,
                                                     std::map<std::string, HttpHandler> routes);
  // Stops serving and joins the threads.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port bound (the one asked for, or the one the system chose for port 0).
  int port() const { return port_; }
  const std::string& address() const { return address_; }

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::string address_;
};

}  // namespace tunefarm
