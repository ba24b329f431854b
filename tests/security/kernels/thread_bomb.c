/* Finding 8: starts threads that never end, up to 5,000. Returns 0 when the sandbox stopped it
   before 2,000, 91 when it got that many. */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

static void* forever(void* arg) {
  (void)arg;
  for (;;) pause();
  return 0;
}

int32_t entry(void* const* args) {
  (void)args;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 << 10);
  int started = 0;
  for (; started < 5000; ++started) {
    pthread_t t;
    if (pthread_create(&t, &attr, forever, 0) != 0) break;
  }
  return started >= 2000 ? 91 : 0;
}
