/* Finding 8: descriptors the agent opened without close-on-exec reach the worker. Returns 111 when
   any open descriptor names a file with "tunefarm-leak" in its path (a test opens one); 0
   otherwise. Without /proc it compares inodes with $TUNEFARM_TEST_LEAKED_INO instead. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  const char* ino_text = getenv("TUNEFARM_TEST_LEAKED_INO");
  unsigned long long leaked_ino = ino_text ? strtoull(ino_text, 0, 10) : 0;
  for (int fd = 0; fd < 1024; ++fd) {
    struct stat st;
    if (leaked_ino && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_ino == leaked_ino) return 111;
    char link[64], target[512];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = 0;
    if (strstr(target, "tunefarm-leak")) return 111;
  }
  return 0;
}
