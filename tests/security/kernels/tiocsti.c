/* Finding 6: keystrokes into a terminal. Returns 61 when it has a controlling terminal (/dev/tty
   opens: it could type into the shell that started the agent) and 62 when TIOCSTI pushes a byte
   into a terminal it opened itself (a pseudo-terminal, as root may); 0 when both are refused. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  int tty = open("/dev/tty", O_RDWR | O_NOCTTY);
  if (tty >= 0) return 61;
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) return 0;
  const char* name = ptsname(master);
  int slave = name ? open(name, O_RDWR | O_NOCTTY) : -1;
  if (slave < 0) return 0;
  char c = 'x';
  if (ioctl(slave, TIOCSTI, &c) == 0) return 62;
  return 0;
}
