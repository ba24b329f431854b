// tunefarm-measure-worker: the sandbox. The agent (or the tuner's local runner) starts it with a
// private scratch directory and talks to it over fd 3 (worker_channel.h); everything that runs
// foreign code happens here, so a crash or a hang costs this process, never its parent.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "compiler/runtime/kernel_runtime.h"
#include "measure/cpu_runner.h"
#include "measure/cuda_runner.h"
#include "measure/measure_options.h"
#include "measure/sandbox.h"
#include "measure/tensors.h"
#include "measure/timer.h"
#include "measure/worker_channel.h"
#include "tunefarm/v1/tracker.pb.h"

namespace tunefarm {
namespace {

constexpr int kChannelFd = 3;

v1::MeasureResult failure(v1::ErrorCode code, std::string message) {
  v1::MeasureResult result;
  result.set_error(code);
  result.set_error_msg(std::move(message));
  return result;
}

class Worker {
 public:
  Worker(std::string scratch, uint64_t cpu_seconds) : scratch_(std::move(scratch)), cpu_seconds_(cpu_seconds) {}

  v1::MeasureResult handle(const v1::LeasedBatch& request) {
    v1::MeasureOptions options = with_defaults(request.options());
    double cpu_budget = cpu_seconds_ > 0 ? static_cast<double>(cpu_seconds_)
                                         : options.timeout_s() * std::max(1u, std::thread::hardware_concurrency()) + 1;
    if (Status s = limit_cpu_time(cpu_budget); !s.ok()) return failure(v1::UNKNOWN, s.message());
    if (request.candidates_size() == 0) {
      auto outputs = reference_outputs(request, options);
      if (!outputs.ok()) return failure(v1::UNKNOWN, outputs.status().message());
      return v1::MeasureResult();
    }
    const v1::Artifact& candidate = request.candidates(0).artifact();
    const std::vector<std::string>* expected = nullptr;
    if (options.check_correctness()) {
      auto outputs = reference_outputs(request, options);
      if (!outputs.ok()) return failure(v1::UNKNOWN, outputs.status().message());
      expected = *outputs;
    }
    auto tensors = allocate_tensors(candidate.args());
    if (!tensors.ok()) return failure(v1::LOAD_ERROR, tensors.status().message());
    fill_tensors(*tensors, options.input_seed());
    auto kernel = bind(candidate, *tensors);
    if (!kernel.ok()) return failure(v1::LOAD_ERROR, kernel.status().message());
    if (Status s = (*kernel)->run_once(); !s.ok()) return failure(v1::RUNTIME_ERROR, s.message());
    if (expected) {
      if (Status s = (*kernel)->copy_outputs(*tensors); !s.ok()) return failure(v1::RUNTIME_ERROR, s.message());
      if (Status s = compare_outputs(*tensors, *expected, options.rtol(), options.atol()); !s.ok())
        return failure(v1::WRONG_ANSWER, s.message());
    }
    auto costs = time_kernel(**kernel, options);
    if (!costs.ok()) return failure(v1::RUNTIME_ERROR, costs.status().message());
    v1::MeasureResult result;
    for (double c : *costs) result.add_costs(c);
    return result;
  }

 private:
  StatusOr<std::unique_ptr<BoundKernel>> bind(const v1::Artifact& artifact, std::vector<HostTensor>& tensors) {
    switch (artifact.format()) {
      case v1::Artifact::SHARED_OBJECT: {
        // A fresh name for every load: dlopen would hand back an already loaded object of the same path.
        std::string path = fmt::format("{}/kernel-{}.so", scratch_, next_file_++);
        {
          std::ofstream out(path, std::ios::binary);
          out.write(artifact.data().data(), static_cast<std::streamsize>(artifact.data().size()));
          if (!out) return internal_error(fmt::format("cannot write the artifact to the scratch directory"));
        }
        auto kernel = bind_cpu_kernel(path, artifact, tensors);
        std::remove(path.c_str());  // The mapping stays valid after the file is gone.
        return kernel;
      }
      case v1::Artifact::PTX:
        return bind_cuda_kernel(artifact, tensors);
      default:
        return invalid_argument("the artifact has no known format");
    }
  }

  // Runs the reference once per workload and seed and keeps its outputs in this process only. A
  // worker restarted after a crash runs the reference again: outputs kept in the scratch
  // directory could be overwritten by any candidate, and every later check would then be wrong.
  StatusOr<const std::vector<std::string>*> reference_outputs(const v1::LeasedBatch& request,
                                                              const v1::MeasureOptions& options) {
    if (!request.has_reference() || request.reference().data().empty())
      return invalid_argument("check_correctness is set but the batch carries no reference kernel");
    std::string key = reference_cache_key(request.workload(), request.reference(), options.input_seed());
    if (auto it = cache_.find(key); it != cache_.end()) return &it->second;

    auto tensors = allocate_tensors(request.reference().args());
    if (!tensors.ok()) return tensors.status().with_context("the reference kernel");
    fill_tensors(*tensors, options.input_seed());
    auto kernel = bind(request.reference(), *tensors);
    if (!kernel.ok()) return kernel.status().with_context("the reference kernel does not load");
    TF_RETURN_IF_ERROR((*kernel)->run_once().with_context("the reference kernel failed"));
    TF_RETURN_IF_ERROR((*kernel)->copy_outputs(*tensors).with_context("the reference kernel failed"));
    std::vector<std::string> outputs = output_bytes(*tensors);
    return &(cache_[key] = std::move(outputs));
  }



  std::string scratch_;
  uint64_t cpu_seconds_;
  uint64_t next_file_ = 0;
  std::map<std::string, std::vector<std::string>> cache_;
};

// Without a sandbox no kernel runs: every request is answered with the reason.
[[noreturn]] void refuse_all(const std::string& why) {
  for (;;) {
    v1::LeasedBatch request;
    if (read_frame(kChannelFd, request, -1).code() == StatusCode::kUnavailable) std::exit(0);
    if (!write_frame(kChannelFd, failure(v1::UNKNOWN, "the measurement sandbox could not be set up: " + why)).ok())
      std::exit(0);
  }
}

}  // namespace
}  // namespace tunefarm

int main(int argc, char** argv) {
  tunefarm::SandboxLimits limits;
  bool usage_ok = argc >= 3;
  for (int i = 3; usage_ok && i < argc; ++i) usage_ok = tunefarm::parse_limit_flag(argv[i], limits);
  if (!usage_ok) {
    std::fprintf(stderr,
                 "usage: %s SCRATCH_DIR PARENT_PID [--memory-bytes=N] [--file-bytes=N] [--cpu-seconds=N] "
                 "(started by the measurement library)\n",
                 argv[0]);
    return 2;
  }
  // Die with the parent: an orphaned worker (say, in a hanging kernel) would hold a core for nothing.
  // PR_SET_PDEATHSIG would fire when the parent *thread* that started us ends, so poll instead.
  // A parent killed outright cannot remove the scratch directory, so the worker does.
  pid_t parent = static_cast<pid_t>(std::atol(argv[2]));
  if (getppid() != parent) return 1;
  std::string scratch = argv[1];
  // Every glibc malloc arena reserves 64 MiB of address space, which an address-space cap counts.
  if (limits.memory_bytes > 0) mallopt(M_ARENA_MAX, 2);
  // The sandbox goes up before any thread starts, so that every thread is inside it.
  auto sandbox = tunefarm::enter_sandbox(scratch, limits);
  if (!sandbox.ok()) tunefarm::refuse_all(sandbox.status().message());
  if (!sandbox->warnings.empty()) std::fprintf(stderr, "tunefarm-measure-worker: %s", sandbox->warnings.c_str());
  std::thread([parent, scratch] {
    for (;;) {
      if (getppid() != parent) {
        std::error_code ec;
        std::filesystem::remove_all(scratch, ec);
        _exit(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }).detach();
  // Start the kernels' thread pool now rather than inside the first timed run; this call also
  // keeps the runtime library linked, so that loaded kernels find its symbols.
  tunefarm_runtime_num_threads();
  tunefarm::Worker worker(scratch, limits.cpu_seconds);
  for (;;) {
    tunefarm::v1::LeasedBatch request;
    tunefarm::Status status = tunefarm::read_frame(tunefarm::kChannelFd, request, -1);
    if (status.code() == tunefarm::StatusCode::kUnavailable) return 0;
    tunefarm::v1::MeasureResult result =
        status.ok() ? worker.handle(request) : tunefarm::failure(tunefarm::v1::UNKNOWN, status.message());
    if (!tunefarm::write_frame(tunefarm::kChannelFd, result).ok()) return 0;
  }
}
