#include "measure/worker_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace tunefarm {
namespace {

Status write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    // MSG_NOSIGNAL: a worker that died must give an error here, not a SIGPIPE to the agent.
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return unavailable(fmt::format("the worker channel is closed ({})", std::strerror(errno)));
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status();
}

Status read_all(int fd, char* data, size_t size, int64_t deadline_ms) {
  while (size > 0) {
    int wait = -1;
    if (deadline_ms >= 0) {
      int64_t left = deadline_ms - monotonic_ms();
      if (left <= 0) return deadline_exceeded("no reply before the deadline");
      wait = static_cast<int>(left);
    }
    pollfd p{fd, POLLIN, 0};
    int ready = poll(&p, 1, wait);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return internal_error(fmt::format("poll on the worker channel failed: {}", std::strerror(errno)));
    if (ready == 0) continue;
    ssize_t n = recv(fd, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return unavailable("the other side closed the worker channel");
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status();
}

}  // namespace

int64_t monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

Status write_frame(int fd, const google::protobuf::MessageLite& message) {
  std::string body = message.SerializeAsString();
  if (body.size() > kMaxWorkerFrameBytes) return invalid_argument("message too large for the worker channel");
  uint32_t size = static_cast<uint32_t>(body.size());
  char header[4] = {static_cast<char>(size & 0xff), static_cast<char>((size >> 8) & 0xff),
                    static_cast<char>((size >> 16) & 0xff), static_cast<char>((size >> 24) & 0xff)};
  TF_RETURN_IF_ERROR(write_all(fd, header, sizeof header));
  return write_all(fd, body.data(), body.size());
}

Status read_frame(int fd, google::protobuf::MessageLite& message, int64_t deadline_ms) {
  unsigned char header[4];
  TF_RETURN_IF_ERROR(read_all(fd, reinterpret_cast<char*>(header), sizeof header, deadline_ms));
  uint32_t size = header[0] | (header[1] << 8) | (header[2] << 16) | (uint32_t{header[3]} << 24);
  if (size > kMaxWorkerFrameBytes) return invalid_argument(fmt::format("frame of {} bytes is over the limit", size));
  std::string body(size, '\0');
  TF_RETURN_IF_ERROR(read_all(fd, body.data(), size, deadline_ms));
  if (!message.ParseFromString(body)) return invalid_argument("malformed message on the worker channel");
  return Status();
}

std::string reference_cache_key(const v1::Workload& workload, const v1::Artifact& reference, uint64_t input_seed) {
  // FNV-1a, 64 bit: stable across processes, which std::hash does not promise.
  uint64_t hash = 0xcbf29ce484222325ull;
  auto mix = [&hash](const std::string& bytes) {
    for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ull;
  };
  mix(workload.SerializeAsString());
  mix(reference.SerializeAsString());
  mix(std::to_string(input_seed));
  return fmt::format("{:016x}", hash);
}

v1::MeasureResult failure(v1::ErrorCode code, std::string message) {
  v1::MeasureResult result;
  result.set_error(code);
  result.set_error_msg(std::move(message));
  return result;
}

}  // namespace tunefarm
