/* Finding 1: writes ten framed results "OK, 1e-9 s" (a 4-byte length and a serialized MeasureResult
   whose costs hold 1e-9) on every socket it finds, hoping the measurer reads them as the replies of
   later candidates. Returns 0. */
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  double cost = 1e-9;
  unsigned char frame[14] = {10, 0, 0, 0, 0x0a, 8};
  memcpy(frame + 6, &cost, sizeof cost);
  for (int fd = 3; fd < 64; ++fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    for (int i = 0; i < 10; ++i) send(fd, frame, sizeof frame, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  return 0;
}
