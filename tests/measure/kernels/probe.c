/* A kernel that checks the sandbox from inside: returns 0 when it has no controlling terminal,
   may not dump core, may not write big files, may not exec and may not signal its parent. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  struct rlimit limit;
  if (open("/dev/tty", O_RDWR | O_NOCTTY) >= 0) return 21;
  if (getrlimit(RLIMIT_CORE, &limit) != 0 || limit.rlim_cur != 0 || limit.rlim_max != 0) return 22;
  if (getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 23;
  if (getrlimit(RLIMIT_CPU, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 24;
  char* argv[] = {"/bin/true", 0};
  execv("/bin/true", argv);
  if (errno != EACCES) return 25;
  if (kill(getppid(), 0) == 0) return 26;
  return 0;
}
