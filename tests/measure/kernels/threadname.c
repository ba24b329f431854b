/* A kernel that names a thread of its own as the CUDA driver does in cuInit: by writing
   /proc/<getpid()>/task/<gettid()>/comm from that thread (the driver fails its initialisation where it
   cannot). Returns 0 when the name took, else a code saying which step failed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void* name_self(void* result) {
  char path[96];
  snprintf(path, sizeof path, "/proc/%d/task/%ld/comm", (int)getpid(), (long)syscall(SYS_gettid));
  int fd = open(path, O_WRONLY);
  if (fd < 0) {
    *(int*)result = 31;
    return NULL;
  }
  if (write(fd, "kworker-name", 12) != 12) *(int*)result = 32;
  close(fd);
  char back[32] = {0};
  fd = open(path, O_RDONLY);
  if (fd < 0 || read(fd, back, sizeof back - 1) <= 0 || strncmp(back, "kworker-name", 12) != 0) *(int*)result = 33;
  if (fd >= 0) close(fd);
  return NULL;
}

int32_t entry(void* const* args) {
  (void)args;
  int result = 0;
  pthread_t thread;
  if (pthread_create(&thread, NULL, name_self, &result) != 0) return 30;
  pthread_join(thread, NULL);
  return result;
}
