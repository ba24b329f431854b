/* A kernel that overwrites every file it can see in its working directory (the worker's scratch
   directory) with zeros, as a candidate would that tries to poison later correctness checks. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

int32_t entry(void* const* args) {
  (void)args;
  DIR* dir = opendir(".");
  if (!dir) return 0;
  char zeros[4096];
  memset(zeros, 0, sizeof zeros);
  struct dirent* e;
  while ((e = readdir(dir)) != NULL) {
    if (e->d_type != DT_REG) continue;
    int fd = open(e->d_name, O_WRONLY);
    if (fd < 0) continue;
    off_t size = lseek(fd, 0, SEEK_END);
    lseek(fd, 0, SEEK_SET);
    for (off_t done = 0; done < size; done += (off_t)sizeof zeros)
      if (write(fd, zeros, sizeof zeros) < 0) break;
    close(fd);
  }
  closedir(dir);
  return 0;
}
