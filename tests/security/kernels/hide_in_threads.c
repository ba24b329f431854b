/* Hides work from the measurer's subtraction of CPU waits (measure/cpu_wait.h). Each call starts four
   threads that each compute for 3 ms of their own CPU time while the main thread spins until they
   are done: the main thread, runnable all along, waits for a CPU most of that time, and a window
   less its waits alone would credit the kernel with only the main thread's share. Returns 0. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

enum { kHelpers = 4 };
static atomic_int done;

static double thread_cpu_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void* compute(void* arg) {
  (void)arg;
  double start = thread_cpu_seconds();
  volatile unsigned long spins = 0;
  while (thread_cpu_seconds() - start < 3e-3) spins = spins + 1;
  atomic_fetch_add(&done, 1);
  return 0;
}

int32_t entry(void* const* args) {
  (void)args;
  pthread_t helpers[kHelpers];
  atomic_store(&done, 0);
  int started = 0;
  for (; started < kHelpers; ++started)
    if (pthread_create(&helpers[started], 0, compute, 0) != 0) break;
  while (atomic_load(&done) < started) {
  }
  for (int i = 0; i < started; ++i) pthread_join(helpers[i], 0);
  return started == kHelpers ? 0 : 1;
}
