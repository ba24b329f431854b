/* Finding 5: leaves 2,600 nested directories in its working directory, deeper than PATH_MAX, so
   that removing them by path fails with "name too long". Returns 0. */
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  int dir = open(".", O_DIRECTORY | O_RDONLY);
  for (int i = 0; i < 2600 && dir >= 0; ++i) {
    mkdirat(dir, "deep-directory", 0700);
    int next = openat(dir, "deep-directory", O_DIRECTORY | O_RDONLY);
    close(dir);
    dir = next;
  }
  if (dir >= 0) close(dir);
  return 0;
}
