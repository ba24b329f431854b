/* Leaves System V objects behind: a 1 MiB shared memory segment (key 0x74670000, filled) and a
   message queue (key 0x74670001), neither removed. Outside an IPC namespace of its own they would
   outlive the worker on the host, one more per candidate. Returns 0 whether or not they were made:
   what matters is whether the host sees them afterwards. */
#include <stdint.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/shm.h>

int32_t entry(void* const* args) {
  (void)args;
  int id = shmget(0x74670000, 1 << 20, IPC_CREAT | 0600);
  if (id >= 0) {
    char* p = shmat(id, 0, 0);
    if (p != (void*)-1) {
      memset(p, 7, 1 << 20);
      shmdt(p);
    }
  }
  msgget(0x74670001, IPC_CREAT | 0600);
  return 0;
}
