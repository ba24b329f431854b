#include "tuner/build_guard.h"

#include <filesystem>
#include <fstream>

#include <spdlog/spdlog.h>

namespace tunefarm {
namespace {

std::string mark_path(const std::string& directory, const std::string& job_id) {
  return directory.empty() ? "" : (std::filesystem::path(directory) / (job_id + ".building")).string();
}

class GuardedTask : public TuningTask {
 public:
  GuardedTask(std::unique_ptr<TuningTask> inner, BuildGuard& guard) : inner_(std::move(inner)), guard_(guard) {}
  const v1::Workload& workload() const override { return inner_->workload(); }
  double flops() const override { return inner_->flops(); }
  const SearchSpace& space() const override { return inner_->space(); }
  Config config_at(const Point& point) const override { return inner_->config_at(point); }
  StatusOr<Point> point_of(const Config& config) const override { return inner_->point_of(config); }
  Status features(std::span<const Point> points, FeatureMatrix& out) const override {
    return inner_->features(points, out);
  }
  StatusOr<std::vector<float>> history_features(const HistoryRecord& record) const override {
    return inner_->history_features(record);
  }
  StatusOr<v1::Artifact> build(const Point& point) const override {
    guard_.enter();
    auto artifact = inner_->build(point);
    guard_.leave();
    return artifact;
  }
  StatusOr<v1::Artifact> build_reference() const override {
    guard_.enter();
    auto artifact = inner_->build_reference();
    guard_.leave();
    return artifact;
  }
  std::optional<Point> default_point() const override { return inner_->default_point(); }

 private:
  std::unique_ptr<TuningTask> inner_;
  BuildGuard& guard_;
};

}  // namespace

BuildGuard::BuildGuard(std::string directory, std::string job_id)
    : path_(mark_path(directory, job_id)), prior_crashes_(crashes(directory, job_id)) {}

int BuildGuard::crashes(const std::string& directory, const std::string& job_id) {
  std::string path = mark_path(directory, job_id);
  if (path.empty()) return 0;
  std::ifstream in(path);
  int n = 0;
  return in >> n ? n : 0;
}

void BuildGuard::clear(const std::string& directory, const std::string& job_id) {
  std::string path = mark_path(directory, job_id);
  std::error_code ec;
  if (!path.empty()) std::filesystem::remove(path, ec);
}

void BuildGuard::enter() {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_++ > 0 || path_.empty()) return;
  // Written before the build starts and left in place if the process dies during it; the page
  // cache keeps it through a crash of the process, which is all it must survive.
  std::ofstream out(path_, std::ios::trunc);
  out << prior_crashes_ + 1 << "\n";
  if (!out) spdlog::warn("cannot write the build mark {}", path_);
}

void BuildGuard::leave() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--active_ > 0 || path_.empty()) return;
  // Builds of this job complete: whatever killed tunerd before was not this job's compile.
  prior_crashes_ = 0;
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

std::unique_ptr<TuningTask> guard_builds(std::unique_ptr<TuningTask> inner, BuildGuard& guard) {
  return std::make_unique<GuardedTask>(std::move(inner), guard);
}

}  // namespace tunefarm
