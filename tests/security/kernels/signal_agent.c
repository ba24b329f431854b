/* Finding 4: reaches the agent with a signal. It joins the agent's process group and signals the
   group (the attack used SIGSTOP; SIGURG, ignored by default, shows the same reach harmlessly), then
   signals the agent directly. The agent's pid comes from $TUNEFARM_TEST_AGENT_PID (pids are easy
   to guess). Returns 0. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  const char* agent_text = getenv("TUNEFARM_TEST_AGENT_PID");
  pid_t agent = agent_text ? (pid_t)atol(agent_text) : getppid();
  pid_t group = getpgid(agent);
  if (group > 0 && setpgid(0, group) == 0) kill(0, SIGURG);
  kill(agent, SIGURG);
  return 0;
}
