/* A kernel whose entry point is not the symbol its artifact names. */
#include <stdint.h>

int32_t some_other_name(void* const* args) {
  (void)args;
  return 0;
}
