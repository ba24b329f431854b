/* Two kernels from one file: LEAVE writes a file into its working and temporary directories, as a
   candidate would that leaves something for the next one; otherwise the kernel returns 61 when it
   finds such a file, 0 when its scratch is clean. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char* in_tmp(char* buf, size_t n) {
  const char* tmp = getenv("TMPDIR");
  snprintf(buf, n, "%s/leftover", tmp ? tmp : ".");
  return buf;
}

int32_t entry(void* const* args) {
  (void)args;
  char path[4096];
#ifdef LEAVE
  FILE* f = fopen("leftover", "w");
  if (f) fclose(f);
  f = fopen(in_tmp(path, sizeof path), "w");
  if (f) fclose(f);
  f = fopen("../leftover", "w");
  if (f) fclose(f);
  return 0;
#else
  if (access("leftover", F_OK) == 0 || access(in_tmp(path, sizeof path), F_OK) == 0 ||
      access("../leftover", F_OK) == 0)
    return 61;
  return 0;
#endif
}
