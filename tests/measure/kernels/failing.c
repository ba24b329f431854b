/* A kernel that reports failure through its return value. */
#include <stdint.h>

int32_t entry(void* const* args) {
  (void)args;
  return 7;
}
