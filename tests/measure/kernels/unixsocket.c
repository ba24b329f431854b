/* A kernel that opens a Unix socket, as a GPU driver does when it initialises, and then tries the
   network. Returns 0 when the Unix socket opened and the network one was refused, 21 when the Unix
   socket was refused, 22 when the network one opened. */
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return 21;
  close(fd);
  fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0) {
    close(fd);
    return 22;
  }
  return 0;
}
