/* A kernel that tries to leave a process behind: a child in its own session with SIGTERM blocked,
   which would outlive the worker. Returns 0 when the sandbox refused the fork, 51 when it got one. */
#include <signal.h>
#include <stdint.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    setsid();
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    sleep(30);
    _exit(0);
  }
  return 51;
}
