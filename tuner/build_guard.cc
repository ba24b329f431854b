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

class FileMarks : public BuildMarks {
 public:
  explicit FileMarks(std::string directory) : directory_(std::move(directory)) {}
  int crashes(const std::string& job_id) override {
    std::string path = mark_path(directory_, job_id);
    if (path.empty()) return 0;
    std::ifstream in(path);
    int n = 0;
    return in >> n ? n : 0;
  }
  void set(const std::string& job_id, int crashes) override {
    std::string path = mark_path(directory_, job_id);
    if (path.empty()) return;
    if (crashes == 0) {
      std::error_code ec;
      std::filesystem::remove(path, ec);
      return;
    }
    // Written before the build starts and left in place if the process dies during it; the page
    // cache keeps it through a crash of the process, which is all it must survive.
    std::ofstream out(path, std::ios::trunc);
    out << crashes << "\n";
    if (!out) spdlog::warn("cannot write the build mark {}", path);
  }

 private:
  std::string directory_;
};

class HistoryMarks : public BuildMarks {
 public:
  explicit HistoryMarks(db::RecordStore& store) : store_(store) {}
  int crashes(const std::string& job_id) override {
    auto crashes = store_.build_crashes(job_id);
    if (crashes.ok()) return static_cast<int>(*crashes);
    spdlog::warn("job {}: cannot read its build mark: {}", job_id, crashes.status().to_string());
    return 0;
  }
  void set(const std::string& job_id, int crashes) override {
    // Committed before the build starts: a tunerd that dies in it leaves the mark to the next.
    if (Status s = store_.set_build_crashes(job_id, crashes); !s.ok())
      spdlog::warn("job {}: cannot write its build mark: {}", job_id, s.to_string());
  }

 private:
  db::RecordStore& store_;
};

}  // namespace

std::unique_ptr<BuildMarks> file_build_marks(std::string directory) {
  return std::make_unique<FileMarks>(std::move(directory));
}

std::unique_ptr<BuildMarks> history_build_marks(db::RecordStore& store) {
  return std::make_unique<HistoryMarks>(store);
}

BuildGuard::BuildGuard(BuildMarks& marks, std::string job_id)
    : marks_(marks), job_id_(std::move(job_id)), prior_crashes_(marks.crashes(job_id_)) {}

void BuildGuard::enter() {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_++ > 0) return;
  marks_.set(job_id_, prior_crashes_ + 1);
}

void BuildGuard::leave() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--active_ > 0) return;
  // Builds of this job complete: whatever killed tunerd before was not this job's compile.
  prior_crashes_ = 0;
  marks_.set(job_id_, 0);
}

std::unique_ptr<TuningTask> guard_builds(std::unique_ptr<TuningTask> inner, BuildGuard& guard) {
  return std::make_unique<GuardedTask>(std::move(inner), guard);
}

}  // namespace tunefarm
