/* Finding 8: holds memory the address-space limit does not count: 1 GiB in a memfd, else in a
   file in /dev/shm, else in a file in its working directory when that is a tmpfs. Returns 81 when
   it held it all; 0 when every way was refused or cut short. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

static int fill(int fd) {
  static char chunk[1 << 20];
  memset(chunk, 7, sizeof chunk);
  for (int i = 0; i < 1024; ++i)
    if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) return 0;
  return 1;
}

int32_t entry(void* const* args) {
  (void)args;
  int fd = memfd_create("hold", 0);
  if (fd >= 0 && fill(fd)) return 81;
  char path[64];
  snprintf(path, sizeof path, "/dev/shm/tunefarm-hold-%d", (int)getpid());
  fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd >= 0) {
    int held = fill(fd);
    unlink(path);
    if (held) return 81;
  }
  struct statfs cwd;
  if (statfs(".", &cwd) == 0 && cwd.f_type == TMPFS_MAGIC) {
    fd = open("hold", O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0 && fill(fd)) return 81;
  }
  return 0;
}
