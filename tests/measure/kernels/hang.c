/* A kernel that never returns. */
#include <stdint.h>

int32_t entry(void* const* args) {
  volatile int spin = 1;
  while (spin) (void)args;
  return 0;
}
