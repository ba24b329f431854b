// Measures candidates on this machine, one at a time, through the same sandboxed measurement code
// that the device agent runs (measure/measure.h). Used by local tuning and benchmarks; tunerd
// measures on the farm instead.
#pragma once

#include <memory>

#include "search/tuning_loop.h"

namespace tunefarm {

class Measurer;

class LocalMeasureBackend : public MeasureBackend {
 public:
  static StatusOr<std::unique_ptr<LocalMeasureBackend>> create();
  ~LocalMeasureBackend() override;

  Status measure(const v1::Workload& workload, const v1::MeasureOptions& options, const v1::Artifact* reference,
                 std::span<const v1::Artifact> candidates, const ResultFn& on_result) override;
  bool shares_host_cpu() const override { return true; }

 private:
  explicit LocalMeasureBackend(std::unique_ptr<Measurer> measurer);
  std::unique_ptr<Measurer> measurer_;
};

}  // namespace tunefarm
