/* Kernels that try to pass files from one candidate to the next. Built plain, it leaves files
   wherever it can write: in its working directory, in $TMPDIR, in the directory above, and
   directories it locks (mode 000) so that they are hard to remove; with CRASH it then crashes, so
   that its worker cannot clean up after it. Built with CHECK, it looks for those files and returns
   a code naming the first it finds (0: none). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char* tmpdir(void) {
  const char* t = getenv("TMPDIR");
  return t ? t : "/tmp";
}

#ifndef CHECK
static void leave(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  if (write(fd, "left for the next candidate\n", 28) < 0) {}
  close(fd);
}

int32_t entry(void* const* args) {
  (void)args;
  char path[4096];
  leave("litter-cwd");
  snprintf(path, sizeof path, "%s/litter-tmp", tmpdir());
  leave(path);
  leave("../litter-parent");
  mkdir("../litter-locked", 0700);
  leave("../litter-locked/inside");
  chmod("../litter-locked", 0);
  mkdir("litter-locked", 0700);
  leave("litter-locked/inside");
  chmod("litter-locked", 0);
#ifdef CRASH
  *(volatile int*)0 = 1;
#endif
  return 0;
}
#else
int32_t entry(void* const* args) {
  (void)args;
  char path[4096];
  if (access("litter-cwd", F_OK) == 0) return 51;
  snprintf(path, sizeof path, "%s/litter-tmp", tmpdir());
  if (access(path, F_OK) == 0) return 52;
  if (access("../litter-parent", F_OK) == 0) return 53;
  if (access("../litter-locked", F_OK) == 0) return 54;
  if (access("litter-locked", F_OK) == 0) return 55;
  return 0;
}
#endif
