#include "measure/worker.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "common/wire/wire.h"
#include "common/workload.h"
#include "measure/cpu_runner.h"
#include "measure/cuda_runner.h"
#include "measure/measure_options.h"
#include "measure/scratch.h"
#include "measure/timer.h"
#include "measure/worker_channel.h"

namespace tunefarm {
namespace {

// The request's tolerances scaled to its workload's reduction length. A workload this build
// cannot read gets them unscaled: the strictest check, whose message names the tolerance used.
Tolerance check_tolerance(const v1::Workload& workload, const v1::MeasureOptions& options) {
  auto parsed = from_proto(workload);
  return scaled_tolerance(options.rtol(), options.atol(), parsed.ok() ? reduction_length(*parsed) : 1);
}

}  // namespace

MeasureWorker::MeasureWorker(std::string scratch_dir, uint64_t cpu_seconds, CpuLimit limit_cpu)
    : scratch_(std::move(scratch_dir)), cpu_seconds_(cpu_seconds), limit_cpu_(std::move(limit_cpu)) {}

v1::MeasureResult MeasureWorker::handle(const v1::LeasedBatch& request) {
  auto dir = make_candidate_scratch(scratch_, next_request_++);
  if (!dir.ok()) return failure(v1::UNKNOWN, dir.status().message());
  candidate_dir_ = *dir;
  // The kernel's working directory and temporary files are its own directory, for this request
  // only: the worker's come back after it.
  int previous_cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  const char* tmpdir = getenv("TMPDIR");
  std::optional<std::string> previous_tmpdir = tmpdir ? std::optional<std::string>(tmpdir) : std::nullopt;
  v1::MeasureResult result;
  if (previous_cwd < 0 || chdir(dir->c_str()) != 0) {
    result = failure(v1::UNKNOWN, fmt::format("cannot enter the candidate's scratch directory '{}': {}", *dir,
                                              std::strerror(errno)));
  } else {
    setenv("TMPDIR", dir->c_str(), 1);
    result = handle_in_scratch(request);
  }
  if (previous_cwd >= 0) {
    // Never stay in a directory that is about to be removed.
    if (fchdir(previous_cwd) != 0 && chdir("/") != 0) std::abort();
    close(previous_cwd);
  }
  if (previous_tmpdir) setenv("TMPDIR", previous_tmpdir->c_str(), 1);
  else unsetenv("TMPDIR");
  // Whatever the candidate left, in its directory or elsewhere in the worker's scratch, goes before
  // the next one runs. A RUNTIME_ERROR makes the measurer start a new worker, and it clears first.
  if (Status cleared = clear_scratch(scratch_); !cleared.ok())
    return failure(v1::RUNTIME_ERROR, "the candidate left files the worker cannot remove: " + cleared.message());
  return result;
}

v1::MeasureResult MeasureWorker::handle_in_scratch(const v1::LeasedBatch& request) {
  v1::MeasureOptions options = with_defaults(request.options());
  double cpu_budget = cpu_seconds_ > 0 ? static_cast<double>(cpu_seconds_)
                                       : options.timeout_s() * std::max(1u, std::thread::hardware_concurrency()) + 1;
  if (Status s = limit_cpu_(cpu_budget); !s.ok()) return failure(v1::UNKNOWN, s.message());
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
    if (Status s = compare_outputs(*tensors, *expected, check_tolerance(request.workload(), options)); !s.ok())
      return failure(v1::WRONG_ANSWER, s.message());
  }
  auto costs = time_kernel(**kernel, options);
  if (!costs.ok()) return failure(v1::RUNTIME_ERROR, costs.status().message());
  v1::MeasureResult result;
  for (double c : *costs) result.add_costs(c);
  return result;
}

void MeasureWorker::serve(int fd) {
  for (;;) {
    v1::LeasedBatch request;
    Status status = read_frame(fd, request, -1);
    if (status.code() == StatusCode::kUnavailable) return;
    v1::MeasureResult result = status.ok() ? handle(request) : failure(v1::UNKNOWN, status.message());
    if (!write_frame(fd, result).ok()) return;
  }
}

StatusOr<std::unique_ptr<BoundKernel>> MeasureWorker::bind(const v1::Artifact& artifact,
                                                           std::vector<HostTensor>& tensors) {
  switch (artifact.format()) {
    case v1::Artifact::SHARED_OBJECT: {
      // A fresh name for every load: dlopen would hand back an already loaded object of the same path.
      std::string path = fmt::format("{}/kernel-{}.so", candidate_dir_, next_file_++);
      {
        std::ofstream out(path, std::ios::binary);
        out.write(artifact.data().data(), static_cast<std::streamsize>(artifact.data().size()));
        if (!out) return internal_error("cannot write the artifact to the scratch directory");
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
// worker restarted after a crash runs the reference again: outputs kept in the scratch directory
// could be overwritten by any candidate, and every later check would then be wrong.
StatusOr<const std::vector<std::string>*> MeasureWorker::reference_outputs(const v1::LeasedBatch& request,
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
  return &(cache_[key] = output_bytes(*tensors));
}

void refuse_requests(int fd, const std::string& why) {
  for (;;) {
    v1::LeasedBatch request;
    if (read_frame(fd, request, -1).code() == StatusCode::kUnavailable) return;
    if (!write_frame(fd, failure(v1::UNKNOWN, "the measurement sandbox could not be set up: " + why)).ok()) return;
  }
}

}  // namespace tunefarm
