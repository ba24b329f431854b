/* A kernel that writes outside its scratch directory: to $TUNEFARM_TEST_ESCAPE_PATH when the test
   names a place, else next to the worker's scratch directory (two levels above its working
   directory, which is the candidate's own directory inside the worker's scratch). */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  const char* path = getenv("TUNEFARM_TEST_ESCAPE_PATH");
  int fd = open(path ? path : "../../tunefarm-escaped", O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return 12;
  ssize_t n = write(fd, "escaped\n", 8);
  close(fd);
  return n == 8 ? 0 : 13;
}
