/* Finding 8: holds shared memory that the address-space cap does not see: System V segments
   (keys from 0x74660000), each attached, filled and detached in turn, up to
   $TUNEFARM_TEST_GROW_MB MiB (512 unless set) in all. Returns 111 when it held it all (and
   removes them); 0 when a segment was refused. A cgroup's memory limit counts every page, so
   under one the kernel's OOM killer ends it first. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>

#define KEY_BASE 0x74660000
#define SEGMENT (32L << 20)

int32_t entry(void* const* args) {
  (void)args;
  const char* mb = getenv("TUNEFARM_TEST_GROW_MB");
  long segments = (mb ? atol(mb) : 512) / 32;
  for (long i = 0; i < segments; ++i) {
    int id = shmget(KEY_BASE + (int)i, SEGMENT, IPC_CREAT | 0600);
    if (id < 0) return 0;
    char* p = shmat(id, 0, 0);
    if (p == (void*)-1) return 0;
    memset(p, 7, SEGMENT);
    shmdt(p);
  }
  for (long i = 0; i < segments; ++i) shmctl(shmget(KEY_BASE + (int)i, 0, 0), IPC_RMID, 0);
  return 111;
}
