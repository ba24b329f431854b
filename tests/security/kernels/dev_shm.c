/* Finding 8: other programs' shared memory. Returns 101 when it can read the file named by
   $TUNEFARM_TEST_SHM_FILE (a test plants it in /dev/shm), 102 when it can create a file in
   /dev/shm; 0 when both are refused. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  const char* planted = getenv("TUNEFARM_TEST_SHM_FILE");
  if (planted) {
    int fd = open(planted, O_RDONLY);
    char c;
    if (fd >= 0 && read(fd, &c, 1) == 1) return 101;
  }
  char path[64];
  snprintf(path, sizeof path, "/dev/shm/tunefarm-probe-%d", (int)getpid());
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd >= 0) {
    unlink(path);
    return 102;
  }
  return 0;
}
