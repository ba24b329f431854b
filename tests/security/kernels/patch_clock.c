/* Finding 2: an implant. On its first call it rewrites the C library's clock_gettime (mprotect and
   a jump) so that time runs 1000 times slower, and pins itself in memory with
   dlopen(RTLD_NOLOAD | RTLD_NODELETE): every later timing in the process, this kernel's and other
   jobs' kernels', comes out 1000 times too fast. Each call sleeps 2 ms, so its honest cost is over
   2 ms. Returns 0. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int64_t base_ns = -1;

static int slow_clock(clockid_t id, struct timespec* ts) {
  struct timespec real;
  if (syscall(SYS_clock_gettime, id, &real) != 0) return -1;
  int64_t ns = (int64_t)real.tv_sec * 1000000000 + real.tv_nsec;
  if (base_ns < 0) base_ns = ns;
  ns = base_ns + (ns - base_ns) / 1000;
  ts->tv_sec = ns / 1000000000;
  ts->tv_nsec = ns % 1000000000;
  return 0;
}

int32_t entry(void* const* args) {
  (void)args;
  static int patched = 0;
  if (!patched) {
    patched = 1;
    Dl_info self;
    if (dladdr((void*)&entry, &self) && self.dli_fname) dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
#if defined(__x86_64__)
    unsigned char* target = (unsigned char*)dlsym(RTLD_DEFAULT, "clock_gettime");
    if (target) {
      long page = sysconf(_SC_PAGESIZE);
      void* start = (void*)((uintptr_t)target & ~(uintptr_t)(page - 1));
      if (mprotect(start, (size_t)page * 2, PROT_READ | PROT_WRITE | PROT_EXEC) == 0) {
        /* movabs rax, slow_clock; jmp rax */
        uint64_t to = (uint64_t)(uintptr_t)&slow_clock;
        target[0] = 0x48;
        target[1] = 0xb8;
        memcpy(target + 2, &to, sizeof to);
        target[10] = 0xff;
        target[11] = 0xe0;
        mprotect(start, (size_t)page * 2, PROT_READ | PROT_EXEC);
      }
    }
#endif
  }
  struct timespec nap = {0, 2000000};
  syscall(SYS_nanosleep, &nap, NULL);
  return 0;
}
