/* A kernel that segfaults: writes through a null pointer. */
#include <stdint.h>

int32_t entry(void* const* args) {
  volatile float* nowhere = (volatile float*)0;
  nowhere[(uintptr_t)args & 1] = 1.0f;
  return 0;
}
