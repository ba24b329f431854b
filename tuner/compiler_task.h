// A TuningTask backed by the embedded compiler: the template's config space as a search space,
// configs built into artifacts, and feature vectors for the cost model.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/target.h"
#include "common/workload.h"
#include "compiler/ops/space.h"
#include "search/tuning_loop.h"
#include "tunefarm/v1/tuner.pb.h"

namespace tunefarm {

struct BuiltKernel;

// Turns a compiled kernel into the artifact that agents load.
v1::Artifact to_artifact(const BuiltKernel& kernel, const Target& target);

// What the cost model sees of a candidate.
enum class FeatureKind {
  // The knob values themselves (log2 of split factors, one-hot choices). The default: they rank
  // held-out measurements as well as loop features do on our templates, and simulated annealing
  // scores some 14,000 new candidates per batch, which knob features describe in ~0.1 s in all.
  kKnob,
  // compiler/features: the candidate's loop nest (extents, annotations, access strides, reuse),
  // log-scaled and comparable across templates and shapes. Each row lowers the candidate
  // (~0.2 ms), so planning a batch takes seconds (bench/RESULTS.md).
  kLoop,
};
std::string_view feature_kind_name(FeatureKind kind);
StatusOr<FeatureKind> parse_feature_kind(std::string_view name);

class CompilerTask : public TuningTask {
 public:
  // INVALID_ARGUMENT when the workload, target or template is not one the compiler knows.
  static StatusOr<std::unique_ptr<CompilerTask>> create(const Workload& workload, const Target& target,
                                                        const std::string& template_name = "",
                                                        FeatureKind features = FeatureKind::kKnob);
  ~CompilerTask() override;

  const v1::Workload& workload() const override;
  double flops() const override;
  const SearchSpace& space() const override;
  Config config_at(const Point& point) const override;
  StatusOr<Point> point_of(const Config& config) const override;
  Status features(std::span<const Point> points, FeatureMatrix& out) const override;
  StatusOr<std::vector<float>> history_features(const HistoryRecord& record) const override;
  StatusOr<v1::Artifact> build(const Point& point) const override;
  StatusOr<v1::Artifact> build_reference() const override;
  std::optional<Point> default_point() const override;

  const std::string& template_name() const;

 private:
  struct Impl;
  explicit CompilerTask(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The TaskFactory that tunerd uses.
// Checks records from outside (imports) against the compiler: the target is one LLVM can build for,
// and the config is a point of its template's space for that workload and target. Spaces are
// kept between calls, so checking a large import costs one space per distinct task.
class RecordConfigCheck {
 public:
  Status operator()(const v1::Record& record);

 private:
  std::map<std::string, StatusOr<ops::ConfigSpace>> spaces_;
};

class CompilerTaskFactory : public TaskFactory {
 public:
  explicit CompilerTaskFactory(FeatureKind features = FeatureKind::kKnob) : features_(features) {}
  StatusOr<std::unique_ptr<TuningTask>> make_task(const Workload& workload, const Target& target,
                                                  const std::string& template_name) override;

 private:
  FeatureKind features_;
};

}  // namespace tunefarm
