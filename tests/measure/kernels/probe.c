/* A kernel that checks the sandbox from inside: returns 0 when it runs in its own process group,
   may not dump core, may not write big files, may not exec and may not signal its parent. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  struct rlimit limit;
  if (getpgrp() != getpid()) return 21;
  if (getrlimit(RLIMIT_CORE, &limit) != 0 || limit.rlim_cur != 0 || limit.rlim_max != 0) return 22;
  if (getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 23;
  if (getrlimit(RLIMIT_CPU, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 24;
  char* argv[] = {"/bin/true", 0};
  execv("/bin/true", argv);
  if (errno != EACCES) return 25;
  if (kill(getppid(), 0) == 0) return 26;
  return 0;
}
