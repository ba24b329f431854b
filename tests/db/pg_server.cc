#include "pg_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <libpq-fe.h>

namespace tunefarm::testing {
namespace {

namespace fs = std::filesystem;

// TUNEFARM_PG_BIN, or the newest Debian server (postgresql-NN puts its programs there).
std::string find_bin() {
  std::error_code ec;
  if (const char* bin = std::getenv("TUNEFARM_PG_BIN"); bin && *bin)
    return fs::exists(std::string(bin) + "/initdb", ec) && fs::exists(std::string(bin) + "/postgres", ec) ? bin : "";
  std::string best;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    std::string bin = (entry.path() / "bin").string();
    if (fs::exists(bin + "/initdb", ec) && fs::exists(bin + "/postgres", ec) && bin > best) best = bin;
  }
  return best;
}

[[noreturn]] void die(const std::string& what, const std::string& log) {
  std::fprintf(stderr, "test PostgreSQL: %s\n%s\n", what.c_str(), log.c_str());
  std::abort();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Root runs the server as nobody; anyone else as themselves.
const passwd* server_user() {
  if (::geteuid() != 0) return nullptr;
  const passwd* nobody = ::getpwnam("nobody");
  if (!nobody) die("running as root and there is no user nobody to run the server as", "");
  return nobody;
}

// Starts `argv` as the server's user with stdout and stderr appended to `log`; with `die_with_us`
// the child is sent SIGQUIT (PostgreSQL's immediate shutdown) when this process dies.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log, bool die_with_us) {
  const passwd* user = server_user();
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (user && (::setgroups(0, nullptr) != 0 || ::setgid(user->pw_gid) != 0 || ::setuid(user->pw_uid) != 0)) _exit(126);
  // After setuid: a change of credentials clears the parent-death signal.
  if (die_with_us) ::prctl(PR_SET_PDEATHSIG, SIGQUIT);
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  _exit(127);
}

int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::optional<std::string> PgServer::unavailable() {
  if (!find_bin().empty()) return std::nullopt;
  return std::string("PostgreSQL server binaries not found (no initdb and postgres in /usr/lib/postgresql/*/bin, or "
                     "in TUNEFARM_PG_BIN when set): deploy/install-deps.sh installs postgresql-15");
}

PgServer& PgServer::shared() {
  static PgServer server;
  return server;
}

PgServer::PgServer() : bin_(find_bin()) {
  if (bin_.empty()) die(*unavailable(), "");
  // Under /tmp, which the server's user can reach whatever TMPDIR says.
  std::string pattern = "/tmp/tunefarm-pg-XXXXXX";
  if (!::mkdtemp(pattern.data())) die("cannot make a temporary directory", "");
  dir_ = pattern;
  if (const passwd* user = server_user(); user && ::chown(dir_.c_str(), user->pw_uid, user->pw_gid) != 0)
    die("cannot give " + dir_ + " to nobody", "");
  // No fsync: a test database need not survive a power cut, and syncing is most of initdb's time.
  pid_t initdb = spawn({bin_ + "/initdb", "-D", dir_ + "/data", "-U", "tunefarm", "--auth=trust", "-E", "UTF8",
                        "--locale=C", "--no-sync", "--no-instructions"},
                       dir_ + "/initdb.log", false);
  if (int rc = wait_exit(initdb); rc != 0) die("initdb failed (exit " + std::to_string(rc) + ")", read_file(dir_ + "/initdb.log"));
  start();
}

PgServer::~PgServer() {
  stop();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void PgServer::start() {
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (port_ == 0 || attempt > 0) port_ = free_port();
    pid_ = spawn({bin_ + "/postgres", "-D", dir_ + "/data", "-p", std::to_string(port_), "-k", dir_, "-c",
                  "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c",
                  "full_page_writes=off", "-c", "max_connections=200"},
                 dir_ + "/server.log", true);
    std::string conninfo = "host=127.0.0.1 port=" + std::to_string(port_) + " user=tunefarm dbname=postgres";
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (PQping(conninfo.c_str()) == PQPING_OK) return;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) break;  // Exited: most likely the port was taken.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    stop();
  }
  die("the server did not start", log());
}

void PgServer::stop() {
  if (pid_ <= 0) return;
  // SIGINT: fast shutdown (clients are disconnected); SIGQUIT if it takes too long.
  ::kill(pid_, SIGINT);
  for (int i = 0; i < 500; ++i) {
    int status = 0;
    pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_ || (done < 0 && errno == ECHILD)) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGQUIT);
  wait_exit(pid_);
  pid_ = -1;
}

std::string PgServer::new_database() {
  // Appended rather than "t" + ...: GCC 12 warns (-Wrestrict) wrongly about the latter.
  std::string name = "t";
  name += std::to_string(++databases_);
  std::string conninfo = "host=127.0.0.1 port=" + std::to_string(port_) + " user=tunefarm dbname=postgres";
  PGconn* conn = PQconnectdb(conninfo.c_str());
  PGresult* result = PQexec(conn, ("CREATE DATABASE " + name).c_str());
  bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
  std::string error = PQerrorMessage(conn);
  PQclear(result);
  PQfinish(conn);
  if (!ok) die("CREATE DATABASE failed: " + error, log());
  return "postgresql://tunefarm@127.0.0.1:" + std::to_string(port_) + "/" + name;
}

std::string PgServer::log() const { return read_file(dir_ + "/server.log"); }

}  // namespace tunefarm::testing
