/* A kernel that allocates without bound, touching every page and never checking for failure. */
#include <stdint.h>
#include <stdlib.h>

int32_t entry(void* const* args) {
  const size_t chunk = (size_t)32 << 20;
  for (;;) {
    volatile char* p = malloc(chunk);
    for (size_t i = 0; i < chunk; i += 4096) p[i] = (char)(uintptr_t)args;
  }
  return 0;
}
