/* A kernel that looks for secrets: the file named by $TUNEFARM_TEST_SNOOP_PATH (a token file or
   TLS key of the agent's), the command line and environment of the agent (the process
   $TUNEFARM_TEST_AGENT_PID names: in a PID namespace the kernel's parent is the namespace's init,
   whose entries are the worker's own), and its own environment.
   Returns 0 when it found nothing, else a code naming what it could read. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int readable(const char* path, const char* needle) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  char buf[8192];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  if (!needle) return 1;
  for (ssize_t i = 0; i < n; ++i)
    if (buf[i] == 0) buf[i] = ' ';
  buf[n] = 0;
  return strstr(buf, needle) != NULL;
}

int32_t entry(void* const* args) {
  (void)args;
  const char* secret = getenv("TUNEFARM_TEST_SNOOP_PATH");
  if (secret && readable(secret, NULL)) return 41;
  const char* agent_pid = getenv("TUNEFARM_TEST_AGENT_PID");
  int agent = agent_pid ? atoi(agent_pid) : (int)getppid();
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/environ", agent);
  if (readable(path, "SNOOP_SECRET")) return 42;
  snprintf(path, sizeof path, "/proc/%d/cmdline", agent);
  if (readable(path, NULL)) return 43;
  if (readable("/proc/self/environ", "SNOOP_SECRET")) return 44;
  return 0;
}
