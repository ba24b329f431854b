/* Finding 4: signals the agent without setpgid: a pipe whose reader is owned by the agent
   (F_SETOWN), with F_SETSIG and O_ASYNC, makes the kernel send the signal when the pipe becomes
   readable. The attack used SIGSTOP; SIGURG shows the reach harmlessly. Returns 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  const char* agent_text = getenv("TUNEFARM_TEST_AGENT_PID");
  pid_t agent = agent_text ? (pid_t)atol(agent_text) : getppid();
  int p[2];
  if (pipe(p) != 0) return 0;
  if (fcntl(p[0], F_SETOWN, agent) == 0 && fcntl(p[0], F_SETSIG, SIGURG) == 0 &&
      fcntl(p[0], F_SETFL, O_ASYNC | O_NONBLOCK) == 0) {
    if (write(p[1], "x", 1) != 1) return 0;
  }
  usleep(100000);
  return 0;
}
