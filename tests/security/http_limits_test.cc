// The daemons' HTTP endpoints (metrics, dashboard) under slow clients: connections that trickle a
// request's headers a line at a time, or that open TLS and never say hello, must not keep a normal
// request from being answered, and none may hold the server longer than its connection deadline.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "common/http/http_server.h"
#include "common/temp_dir.h"

namespace tunefarm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// `count` connections that each send a request line and then one header line every 200 ms, for
// ever (slowloris), or, with `send_nothing`, nothing at all (a TLS client that never says hello).
class SlowClients {
 public:
  SlowClients(int port, int count, bool send_nothing) {
    for (int i = 0; i < count; ++i) {
      int fd = connect_to(port);
      if (fd >= 0) fds_.push_back(fd);
    }
    if (send_nothing) return;
    for (int fd : fds_) (void)!send(fd, "GET /metrics HTTP/1.1\r\n", 23, MSG_NOSIGNAL);
    trickler_ = std::thread([this] {
      for (int line = 0; !stop_; ++line) {
        std::string header = fmt::format("X-Slow-{}: 1\r\n", line);
        for (int fd : fds_) (void)!send(fd, header.data(), header.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  ~SlowClients() {
    stop_ = true;
    if (trickler_.joinable()) trickler_.join();
    for (int fd : fds_) close(fd);
  }
  size_t size() const { return fds_.size(); }
  // How many of them the server has closed: past whatever it answered, a read finds the end (or
  // a reset) at once.
  int closed_by_server() const {
    int closed = 0;
    for (int fd : fds_) {
      char buffer[4096];
      ssize_t n;
      while ((n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT)) > 0) {
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) ++closed;
    }
    return closed;
  }

 private:
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::thread trickler_;
};

class HttpLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.status().ok()) << dir_.status().message();
  }

  std::unique_ptr<HttpServer> start(bool tls, HttpServerOptions options = {}) {
    options.listen = "127.0.0.1:0";
    options.name = "metrics";
    if (tls) {
      options.tls_cert = dir_.path() + "/cert.pem";
      options.tls_key = dir_.path() + "/key.pem";
      std::string command = fmt::format(
          "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost "
          "-keyout {} -out {} 2>/dev/null",
          options.tls_key, options.tls_cert);
      EXPECT_EQ(std::system(command.c_str()), 0) << command;
    }
    auto server = HttpServer::start(options, {{"/metrics", [](const HttpRequest&) {
                                                 HttpResponse r;
                                                 r.body = "up 1\n";
                                                 return r;
                                               }}});
    EXPECT_TRUE(server.ok()) << server.status().message();
    return server.ok() ? std::move(*server) : nullptr;
  }

  // GET /metrics as a normal client would; the seconds it took, or a failure.
  static double timed_get(int port, bool tls) {
    std::unique_ptr<httplib::ClientImpl> client;
    if (tls) {
      auto ssl = std::make_unique<httplib::SSLClient>("127.0.0.1", port);
      ssl->enable_server_certificate_verification(false);
      client = std::move(ssl);
    } else {
      client = std::make_unique<httplib::ClientImpl>("127.0.0.1", port);
    }
    client->set_connection_timeout(std::chrono::seconds(30));
    client->set_read_timeout(std::chrono::seconds(30));
    Clock::time_point start = Clock::now();
    auto result = client->Get("/metrics");
    EXPECT_TRUE(result) << "GET /metrics failed: " << httplib::to_string(result.error());
    if (result) {
      EXPECT_EQ(result->status, 200);
      EXPECT_EQ(result->body, "up 1\n");
    }
    return seconds_since(start);
  }

  ScopedTempDir dir_{"", "tunefarm-http-limits-test"};
};

TEST_F(HttpLimitsTest, FortySlowPlainConnectionsDoNotDelayANormalRequest) {
  auto server = start(false);
  ASSERT_TRUE(server);
  SlowClients slow(server->port(), 40, false);
  ASSERT_EQ(slow.size(), 40u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LT(timed_get(server->port(), false), 2.0);
}

TEST_F(HttpLimitsTest, FortySilentTlsConnectionsDoNotDelayANormalRequest) {
  auto server = start(true);
  ASSERT_TRUE(server);
  SlowClients slow(server->port(), 40, true);
  ASSERT_EQ(slow.size(), 40u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LT(timed_get(server->port(), true), 2.0);
}

TEST_F(HttpLimitsTest, ASlowConnectionIsClosedAtItsDeadlineThoughItKeepsSending) {
  HttpServerOptions options;
  options.connection_deadline = std::chrono::milliseconds(1000);
  auto server = start(false, options);
  ASSERT_TRUE(server);
  SlowClients slow(server->port(), 4, false);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(slow.closed_by_server(), 0);
  Clock::time_point start = Clock::now();
  while (slow.closed_by_server() < 4 && seconds_since(start) < 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(slow.closed_by_server(), 4);
  EXPECT_LT(seconds_since(start), 3.0);
}

TEST_F(HttpLimitsTest, BeyondTheConnectionCapARequestWaitsOnlyUntilTheSlowOnesDeadline) {
  HttpServerOptions options;
  options.max_connections = 4;
  options.connection_deadline = std::chrono::milliseconds(1000);
  auto server = start(true, options);
  ASSERT_TRUE(server);
  SlowClients slow(server->port(), 12, true);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Twelve silent ones ahead of it, four at a time, each cut at one second: served within ~3 s.
  double took = timed_get(server->port(), true);
  EXPECT_GT(took, 0.5);
  EXPECT_LT(took, 6.0);
}

}  // namespace
}  // namespace tunefarm
