// Runs kernels under qemu-aarch64 for the aarch64 test. Built with the aarch64 cross compiler
// together with the real kernel runtime (exported, so dlopen'ed kernels resolve it).
// Usage: aarch64_harness MANIFEST. Each manifest line:
//   SO_PATH NARGS (ELEMENTS PATH)...   -- the last argument is the output, written back.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MANIFEST\n", argv[0]);
    return 2;
  }
  std::ifstream manifest(argv[1]);
  std::string line;
  int failures = 0;
  while (std::getline(manifest, line)) {
    std::istringstream ss(line);
    std::string so;
    int nargs = 0;
    ss >> so >> nargs;
    std::vector<std::vector<float>> bufs(nargs);
    std::vector<std::string> paths(nargs);
    std::vector<void*> ptrs;
    for (int i = 0; i < nargs; ++i) {
      int64_t n = 0;
      ss >> n >> paths[i];
      bufs[i].resize(n);
      if (i + 1 < nargs) std::ifstream(paths[i], std::ios::binary).read(reinterpret_cast<char*>(bufs[i].data()), n * 4);
      ptrs.push_back(bufs[i].data());
    }
    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::fprintf(stderr, "dlopen %s: %s\n", so.c_str(), dlerror());
      ++failures;
      continue;
    }
    auto fn = reinterpret_cast<int32_t (*)(void* const*)>(dlsym(h, "tunefarm_kernel"));
    if (!fn || fn(ptrs.data()) != 0) {
      std::fprintf(stderr, "%s: entry missing or failed\n", so.c_str());
      ++failures;
    }
    std::ofstream(paths.back(), std::ios::binary).write(reinterpret_cast<const char*>(bufs.back().data()), bufs.back().size() * 4);
    dlclose(h);
  }
  return failures == 0 ? 0 : 1;
}
