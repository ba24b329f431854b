/* Finding 3: tries to wedge the agent: joins the agent's process group (so that killing the
   worker's group misses it), ignores SIGXCPU, raises its CPU limit to the hard limit and sleeps
   forever. Only SIGKILL of the process itself (or its namespace) ends it. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  const char* agent_text = getenv("TUNEFARM_TEST_AGENT_PID");
  pid_t agent = agent_text ? (pid_t)atol(agent_text) : getppid();
  setpgid(0, getpgid(agent));
  signal(SIGXCPU, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  struct rlimit limit;
  if (getrlimit(RLIMIT_CPU, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_CPU, &limit);
  }
  for (;;) pause();
  return 0;
}
