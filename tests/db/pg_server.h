// A real PostgreSQL server for tests: initdb into a temporary directory, the server started on a
// free 127.0.0.1 port (and a Unix socket in that directory), stopped and the directory removed when
// the object goes. PostgreSQL refuses to run as root, and CI runs as root: the server then runs as
// `nobody`, which owns the directory. The server dies with the test process (a parent-death signal),
// so a test that crashes leaves no server behind.
//
// Tests skip with the reason when the server binaries are missing (deploy/install-deps.sh installs
// them): `if (auto why = PgServer::unavailable()) GTEST_SKIP() << *why;`.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace tunefarm::testing {

class PgServer {
 public:
  // Why no server can be started here (no server binaries), or nothing when one can.
  static std::optional<std::string> unavailable();
  // The server of this test process, started on first use; aborts the test binary with initdb's or
  // the server's log when it cannot start.
  static PgServer& shared();

  PgServer();
  ~PgServer();
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  int port() const { return port_; }
  // A new, empty database of its own: its postgresql:// URL (user tunefarm, no password: the test
  // server trusts connections from this machine).
  std::string new_database();
  // Stops the server (fast shutdown) and starts it again on the same port and data: what a
  // database outage looks like to a client.
  void stop();
  void start();
  std::string log() const;

 private:
  std::string dir_;
  std::string bin_;
  int port_ = 0;
  pid_t pid_ = -1;
  int databases_ = 0;
};

}  // namespace tunefarm::testing
