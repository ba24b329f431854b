/* A kernel that looks for the device directory $TUNEFARM_TEST_DEV_DIR in its /dev (as a GPU
   driver looks for /dev/nvidia-caps). Returns 0 when it is there, 71 when it is not. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

int32_t entry(void* const* args) {
  (void)args;
  const char* dir = getenv("TUNEFARM_TEST_DEV_DIR");
  struct stat st;
  if (!dir || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return 71;
  return 0;
}
