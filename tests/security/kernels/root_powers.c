/* Finding 7: what a kernel of a root agent could do. Returns 71 when it runs as uid 0, 72 when it
   holds any capability, 73 when it can write to /dev/kmsg, 74 when it can make itself SCHED_FIFO,
   75 when it can open /dev/loop-control; 0 when it can do none of these. */
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int holds_capabilities(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  int any = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "CapEff:", 7) == 0 || strncmp(line, "CapPrm:", 7) == 0)
      any |= strspn(line + 7, "\t 0") != strlen(line + 7) - 1;
  }
  fclose(f);
  return any;
}

int32_t entry(void* const* args) {
  (void)args;
  if (geteuid() == 0 || getuid() == 0) return 71;
  if (holds_capabilities()) return 72;
  int kmsg = open("/dev/kmsg", O_WRONLY);
  if (kmsg >= 0) return 73;
  struct sched_param param = {.sched_priority = 1};
  if (sched_setscheduler(0, SCHED_FIFO, &param) == 0) return 74;
  int loop = open("/dev/loop-control", O_RDWR);
  if (loop >= 0) return 75;
  return 0;
}
