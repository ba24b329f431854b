/* A kernel that tries to reach the network: the sandbox must refuse it a socket. */
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 11;
  close(fd);
  return 0;
}
