#include "measure/worker.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "measure/cpu_runner.h"
#include "measure/cuda_runner.h"
#include "measure/measure_options.h"
#include "measure/worker_channel.h"

namespace tunefarm {
namespace {

v1::WorkerReport failed(v1::ErrorCode code, std::string message) {
  v1::WorkerReport report;
  *report.mutable_failure() = failure(code, std::move(message));
  return report;
}

}  // namespace

MeasureWorker::MeasureWorker(std::string scratch_dir, uint64_t cpu_seconds, CpuLimit limit_cpu, std::string sandbox)
    : scratch_(std::move(scratch_dir)),
      cpu_seconds_(cpu_seconds),
      limit_cpu_(std::move(limit_cpu)),
      sandbox_(std::move(sandbox)) {}

void MeasureWorker::serve(int fd) {
  v1::LeasedBatch request;
  Status status = read_frame(fd, request, -1);
  if (status.code() == StatusCode::kUnavailable) return;
  auto answer = [&](v1::WorkerReport report) {
    report.set_sandbox(sandbox_);
    return write_frame(fd, report).ok() && !report.has_failure();
  };
  if (!status.ok()) {
    answer(failed(v1::UNKNOWN, status.message()));
    return;
  }
  v1::MeasureOptions options = with_defaults(request.options());
  double cpu_budget = cpu_seconds_ > 0 ? static_cast<double>(cpu_seconds_)
                                       : options.timeout_s() * std::max(1u, std::thread::hardware_concurrency()) + 1;
  if (Status s = limit_cpu_(cpu_budget); !s.ok()) {
    answer(failed(v1::UNKNOWN, s.message()));
    return;
  }
  // No candidate: the reference, whose outputs the measurer keeps.
  bool is_reference = request.candidates_size() == 0;
  const v1::Artifact& artifact = is_reference ? request.reference() : request.candidates(0).artifact();
  if (is_reference && artifact.data().empty()) {
    answer(failed(v1::UNKNOWN, "the request carries neither a candidate nor a reference kernel"));
    return;
  }
  auto tensors = allocate_tensors(artifact.args());
  if (!tensors.ok()) {
    answer(failed(v1::LOAD_ERROR, tensors.status().message()));
    return;
  }
  fill_tensors(*tensors, options.input_seed());
  auto kernel = bind(artifact, *tensors, options.rotation_bytes());
  if (!kernel.ok()) {
    answer(failed(v1::LOAD_ERROR, kernel.status().message()));
    return;
  }
  // From here on the artifact's code is loaded: nothing below is trusted by the measurer.
  if (Status s = (*kernel)->run_once(); !s.ok()) {
    answer(failed(v1::RUNTIME_ERROR, s.message()));
    return;
  }
  v1::WorkerReport ran;
  if (is_reference || options.check_correctness()) {
    if (Status s = (*kernel)->copy_outputs(*tensors); !s.ok()) {
      answer(failed(v1::RUNTIME_ERROR, s.message()));
      return;
    }
    for (std::string& bytes : output_bytes(*tensors)) ran.add_outputs(std::move(bytes));
  }
  if (!answer(std::move(ran))) return;
  for (;;) {
    v1::WorkerStep step;
    if (!read_frame(fd, step, -1).ok()) return;
    v1::WorkerReport report;
    if (step.flush_cache()) {
      (*kernel)->flush_cache();
    } else {
      auto seconds = (*kernel)->time_runs(std::max(1, step.runs()));
      if (!seconds.ok()) report = failed(v1::RUNTIME_ERROR, seconds.status().message());
      else report.set_seconds(*seconds);
    }
    if (!answer(std::move(report))) return;
  }
}

StatusOr<std::unique_ptr<BoundKernel>> MeasureWorker::bind(const v1::Artifact& artifact,
                                                           std::vector<HostTensor>& tensors, int64_t rotation_bytes) {
  switch (artifact.format()) {
    case v1::Artifact::SHARED_OBJECT: {
      std::string path = scratch_ + "/kernel.so";
      {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(artifact.data().data(), static_cast<std::streamsize>(artifact.data().size()));
        if (!out) return internal_error("cannot write the artifact to the scratch directory");
      }
      auto kernel = bind_cpu_kernel(path, artifact, tensors, rotation_bytes);
      std::remove(path.c_str());  // The mapping stays valid after the file is gone.
      return kernel;
    }
    case v1::Artifact::PTX:
      return bind_cuda_kernel(artifact, tensors);
    default:
      return invalid_argument("the artifact has no known format");
  }
}

void refuse_requests(int fd, const std::string& why) {
  v1::LeasedBatch request;
  if (read_frame(fd, request, -1).code() == StatusCode::kUnavailable) return;
  v1::WorkerReport report = failed(v1::UNKNOWN, "the measurement sandbox could not be set up: " + why);
  // A measurer that is gone by now hears nothing either way.
  (void)write_frame(fd, report);
}

}  // namespace tunefarm
