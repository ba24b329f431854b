#include "measure/scratch.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace tunefarm {
StatusOr<std::string> make_worker_scratch(const std::string& root, uint64_t n) {
  std::string dir = fmt::format("{}/worker-{}", root, n);
  if (mkdir(dir.c_str(), 0700) != 0)
    return internal_error(fmt::format("cannot make the worker's scratch directory '{}': {}", dir, std::strerror(errno)));
  return dir;
}

}  // namespace tunefarm
