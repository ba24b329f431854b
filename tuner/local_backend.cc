#include "tuner/local_backend.h"

#include "measure/measure.h"

namespace tunefarm {

LocalMeasureBackend::LocalMeasureBackend(std::unique_ptr<Measurer> measurer) : measurer_(std::move(measurer)) {}
LocalMeasureBackend::~LocalMeasureBackend() = default;

StatusOr<std::unique_ptr<LocalMeasureBackend>> LocalMeasureBackend::create() {
  TF_ASSIGN_OR_RETURN(std::unique_ptr<Measurer> measurer, Measurer::create());
  return std::unique_ptr<LocalMeasureBackend>(new LocalMeasureBackend(std::move(measurer)));
}

Status LocalMeasureBackend::measure(const v1::Workload& workload, const v1::MeasureOptions& options,
                                    const v1::Artifact* reference, std::span<const v1::Artifact> candidates,
                                    const ResultFn& on_result) {
  for (size_t i = 0; i < candidates.size(); ++i)
    on_result(i, measurer_->measure(workload, options, reference, candidates[i]));
  return Status();
}

}  // namespace tunefarm
