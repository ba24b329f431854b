/* Returns at once, but leaves an exit handler that never returns, so that its worker does not end
   when its channel closes and the measurer must kill it: what it leaves behind (the namespace's
   init, once the process above it is gone) must not stay a zombie. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

static void never_return(void) {
  for (;;) pause();
}

int32_t entry(void* const* args) {
  (void)args;
  atexit(never_return);
  return 0;
}
