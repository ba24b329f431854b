// What every daemon does the same way at start and stop: the rule on serving beyond loopback, a
// listening port that no other process shares, a data directory that one process owns, and the
// signals that stop it. trackerd and tunerd call these; their mains only wire the pieces.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <signal.h>

#include "common/status.h"

namespace grpc {
class Server;
class ServerBuilder;
class ServerCredentials;
}  // namespace grpc

namespace tunefarm {

struct TlsServerFiles;
struct CallGate;

// How a daemon's start or run ends, as its exit code says: 0, 2 when its configuration is wrong
// (flags, files, the exposure rule: the operator must change something before trying again), 1 when
// its environment refused it (a taken port, a locked data directory, a history that cannot be
// opened: trying again later may work).
struct DaemonExit {
  int code = 0;
  std::string message;
  static DaemonExit ok() { return {}; }
  static DaemonExit configuration(const Status& why) { return {2, why.message()}; }
  static DaemonExit environment(const Status& why) { return {1, why.message()}; }
  // UNAVAILABLE (a taken port, a missing resource) is the environment's; anything else the
  // configuration's.
  static DaemonExit of(const Status& why) {
    return why.code() == StatusCode::kUnavailable ? environment(why) : configuration(why);
  }
};

struct CommonFlags;

// A daemon's main after parsing its flags: sets up logging as `program` (level and format from
// `common`), runs `daemon` (which returns when the daemon stops) and prints a failure as
// "program: message" to stderr. Returns the exit code.
int run_daemon(std::string_view program, const CommonFlags& common, const std::function<DaemonExit()>& daemon);

// What a daemon has of the protections that make serving beyond loopback safe.
struct Exposure {
  std::string listen;
  bool tls = false;
  bool tokens = false;
  bool insecure = false;  // --insecure: the operator accepts serving unprotected
  std::string tls_flags;    // the flags that turn TLS on, for the refusal's message
  std::string token_flags;  // the flags (or config keys) that set the tokens
  std::string risk;         // what an unprotected daemon lets anyone do, for the warning
};

// The port of a listen address ("host:port", "[v6]:port"); INVALID_ARGUMENT saying the form
// when it has none.
StatusOr<int> listen_port(const std::string& listen);

// Refuses an address that is not host:port, and a non-loopback one without TLS and tokens unless
// insecure (the Status says which flags are missing); warns in the log when insecure lets it through.
Status check_exposure(const Exposure& exposure);

// The credentials a daemon serves with, after check_exposure: a failure of either is a
// configuration error. TLS from `tls` (plaintext without a certificate; clients must show one signed
// by its client CA when it names one), and `gate` checked before any call's request is read: gRPC
// reads a unary call's whole message before a handler runs, so a check in the handler alone lets
// anyone without a token make the daemon hold up to the message size limit per call.
StatusOr<std::shared_ptr<grpc::ServerCredentials>> serving_credentials(const Exposure& exposure,
                                                                        const TlsServerFiles& tls,
                                                                        const CallGate& gate);

// Blocks SIGTERM and SIGINT in this thread and every thread started after it, so that wait()
// receives them instead of a random thread: construct it before starting any thread. Also ignores
// SIGXFSZ (a write past the file-size limit fails instead of killing the daemon).
class StopSignals {
 public:
  StopSignals();
  // Waits for SIGTERM or SIGINT; returns its number.
  int wait();

 private:
  sigset_t set_;
};

// Why `listen` cannot be bound, from binding it ourselves (gRPC and the HTTP server only say that
// it failed): "address already in use (...)" or the system's reason. Empty when a plain bind
// succeeds (then the address was malformed, or the race was lost).
std::string listen_error(const std::string& listen);

// Adds a listening port on `listen` (never shared: gRPC lets two processes bind one port unless told
// not to, and clients then reach either at random) and starts the server. A taken port is an error
// that says "address already in use".
StatusOr<std::unique_ptr<grpc::Server>> start_server(grpc::ServerBuilder& builder, const std::string& listen,
                                                     std::shared_ptr<grpc::ServerCredentials> credentials);

// An advisory lock on a directory (a LOCK file holding the owner's pid, locked with flock). The OS
// drops it when the process ends, however it ends, so a crash never leaves a directory locked.
class DirectoryLock {
 public:
  // Fails with FAILED_PRECONDITION naming the holder's pid when another process holds it.
  static StatusOr<std::unique_ptr<DirectoryLock>> acquire(const std::string& directory);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  explicit DirectoryLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace tunefarm
