#include "common/helper_program.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

extern char** environ;

namespace tunefarm {
namespace {

constexpr size_t kMaxStderr = 64 << 10;

struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

}  // namespace

StatusOr<std::string> find_helper_program(std::string_view name) {
  std::vector<std::filesystem::path> tried;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) tried.push_back(self.parent_path() / name);
  if (const char* dir = std::getenv("TUNEFARM_BIN_DIR"); dir && *dir) tried.push_back(std::filesystem::path(dir) / name);
  if (!ec) tried.push_back(self.parent_path().parent_path() / "bin" / name);
  std::string looked;
  for (const auto& path : tried) {
    if (access(path.c_str(), X_OK) == 0) return path.string();
    looked += (looked.empty() ? "" : ", ") + path.string();
  }
  return not_found(fmt::format("cannot find {} (looked in: {}); build it or set TUNEFARM_BIN_DIR", name,
                               looked.empty() ? "nowhere" : looked));
}

StatusOr<HelperRun> run_helper(const std::vector<std::string>& argv, std::string_view input,
                               std::chrono::milliseconds timeout) {
  if (argv.empty()) return invalid_argument("no program to run");
  // Sockets rather than pipes: a child that dies before reading its input makes send() fail with
  // EPIPE (MSG_NOSIGNAL) instead of raising SIGPIPE in this process.
  int in[2], out[2], err[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0 ||
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out) != 0 ||
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, err) != 0)
    return internal_error(fmt::format("cannot make sockets for {}: {}", argv[0], std::strerror(errno)));
  Fd in_parent{in[0]}, in_child{in[1]}, out_parent{out[0]}, out_child{out[1]}, err_parent{err[0]}, err_child{err[1]};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_child.fd, 0);
  posix_spawn_file_actions_adddup2(&actions, out_child.fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_child.fd, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return internal_error(fmt::format("cannot start {}: {}", argv[0], std::strerror(rc)));
  in_child.reset();
  out_child.reset();
  err_child.reset();

  HelperRun run;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t sent = 0;
  if (input.empty()) shutdown(in_parent.fd, SHUT_WR);
  char buf[65536];
  while (out_parent.fd >= 0 || err_parent.fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      run.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd fds[3] = {{out_parent.fd, POLLIN, 0}, {err_parent.fd, POLLIN, 0},
                     {sent < input.size() ? in_parent.fd : -1, POLLOUT, 0}};
    if (poll(fds, 3, static_cast<int>(std::min<int64_t>(left.count(), 1000))) < 0 && errno != EINTR) break;
    if (fds[2].revents & (POLLOUT | POLLERR | POLLHUP)) {
      ssize_t n = send(in_parent.fd, input.data() + sent, std::min<size_t>(input.size() - sent, 1 << 20),
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) sent += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) sent = input.size();  // It stopped reading.
      if (sent >= input.size()) shutdown(in_parent.fd, SHUT_WR);
    }
    for (int k = 0; k < 2; ++k) {
      Fd& fd = k == 0 ? out_parent : err_parent;
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fd.fd, buf, sizeof buf);
      if (n <= 0) {
        fd.reset();
      } else if (k == 0) {
        run.out.append(buf, static_cast<size_t>(n));
      } else if (run.err.size() < kMaxStderr) {
        run.err.append(buf, std::min(static_cast<size_t>(n), kMaxStderr - run.err.size()));
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  return run;
}

}  // namespace tunefarm
