/* Finding 8: starts threads that never end until one is refused, up to 5,000, and returns 1000
   plus how many it started, so that a test can hold the count against the sandbox's caps
   (RLIMIT_NPROC, the cgroup's pids limit). */
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
  return 1000 + started;
}
