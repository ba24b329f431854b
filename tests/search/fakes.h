// Stand-ins for the compiler and the farm, so that the tuning loop and the job manager can be
// tested without either: a task over a synthetic landscape whose "artifact" carries the point's
// index, and a backend that turns that index into a time.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/wire/wire.h"
#include "search/tuning_loop.h"

namespace tunefarm {

// A task over a synthetic landscape: the "artifact" carries the point's index, and the fake
// backend turns it into a time. Knob a == 7 cannot be built; knob b == 7 crashes at run time.
class FakeTask : public TuningTask {
 public:
  FakeTask(std::vector<int64_t> radices, std::function<double(const Point&)> gflops,
           const std::string& workload = "matmul:M=8,N=8,K=8")
      : space_(names(radices.size()), radices), gflops_(std::move(gflops)) {
    workload_ = to_proto(*parse_workload(workload));
  }
  static std::vector<std::string> names(size_t n) {
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) out.push_back(fmt::format("k{}", i));
    return out;
  }
  const v1::Workload& workload() const override { return workload_; }
  double flops() const override { return 1e9; }
  const SearchSpace& space() const override { return space_; }
  Config config_at(const Point& p) const override {
    Config c{"fake", {}};
    for (size_t i = 0; i < p.size(); ++i) c.knobs.emplace_back(space_.names()[i], int64_t{p[i]});
    return c;
  }
  StatusOr<Point> point_of(const Config& c) const override {
    Point p;
    for (const auto& [name, v] : c.knobs) p.push_back(static_cast<int32_t>(std::get<int64_t>(v)));
    TF_RETURN_IF_ERROR(space_.check_range(p));
    return p;
  }
  Status features(std::span<const Point> points, FeatureMatrix& out) const override {
    for (const Point& p : points) TF_RETURN_IF_ERROR(out.add_row(std::vector<float>(p.begin(), p.end())));
    return Status();
  }
  StatusOr<std::vector<float>> history_features(const HistoryRecord& record) const override {
    std::vector<float> row;
    for (const auto& [name, v] : record.config.knobs) row.push_back(static_cast<float>(std::get<int64_t>(v)));
    return row;
  }
  StatusOr<v1::Artifact> build(const Point& p) const override {
    if (p.size() > 0 && p[0] == 7) return invalid_argument("tile does not fit");
    if (on_build) on_build();
    v1::Artifact a;
    a.set_entry_symbol(std::to_string(space_.index_of(p)));
    return a;
  }
  StatusOr<v1::Artifact> build_reference() const override {
    v1::Artifact a;
    a.set_entry_symbol("reference");
    return a;
  }
  std::optional<Point> default_point() const override { return default_; }
  double true_gflops(int64_t index) const { return gflops_(space_.point_at(index)); }
  std::optional<Point> default_;
  std::function<void()> on_build;  // Called from the build threads.

 private:
  v1::Workload workload_;
  SearchSpace space_;
  std::function<double(const Point&)> gflops_;
};

class FakeBackend : public MeasureBackend {
 public:
  FakeBackend(const FakeTask& task, bool shares_cpu) : task_(task), shares_cpu_(shares_cpu) {}
  Status measure(const v1::Workload&, const v1::MeasureOptions&, const v1::Artifact* reference,
                 std::span<const v1::Artifact> candidates, const ResultFn& on_result) override {
    std::lock_guard<std::mutex> lock(mu_);
    saw_reference_ |= reference != nullptr;
    ++calls_;
    if (dead) return Status(StatusCode::kUnavailable, "cannot reach the tracker at 127.0.0.1:9190");
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (drop_after > 0 && static_cast<int>(i) == drop_after)
        return Status(StatusCode::kUnavailable, "the stream to the tracker broke mid-batch");
      if (delay.count() > 0) std::this_thread::sleep_for(delay);
      if (cancelled_.load()) return Status(StatusCode::kCancelled, "withdrawn");
      v1::MeasureResult r;
      if (lose_first > 0) {
        --lose_first;
        r.set_error(v1::DEVICE_LOST);
        r.set_error_msg("no agent");
        on_result(i, r);
        continue;
      }
      if (fail_all) {
        r.set_error(*fail_all);
        r.set_error_msg("the worker aborted");
        on_result(i, r);
        continue;
      }
      int64_t index = std::stoll(candidates[i].entry_symbol());
      measured_[index]++;
      Point p = task_.space().point_at(index);
      double g = task_.true_gflops(index) * (lucky_.count(index) && measured_[index] == 1 ? 10.0 : 1.0);
      if (p.size() > 1 && p[1] == 7) {
        r.set_error(v1::RUNTIME_ERROR);
        r.set_error_msg("segfault");
      } else {
        r.add_costs(1.0 / g);
      }
      on_result(i, r);
      ++results_;
      if (after_result) after_result(results_);
    }
    return Status();
  }
  bool shares_host_cpu() const override { return shares_cpu_; }
  void cancel() override { cancelled_.store(true); }

  std::mutex mu_;
  std::map<int64_t, int> measured_;
  std::set<int64_t> lucky_;  // Measured 10x too fast the first time only.
  std::function<void(int64_t results_so_far)> after_result;
  int64_t results_ = 0;
  int calls_ = 0;
  bool saw_reference_ = false;
  // Failure modes: every result fails with this code; the first `lose_first` candidates come back
  // DEVICE_LOST (no agent ran them); each result takes `delay` (a cancel stops the batch between).
  std::optional<v1::ErrorCode> fail_all;
  int lose_first = 0;
  // A dropped batch: measure() answers the first `drop_after` candidates of each batch, then fails
  // with UNAVAILABLE (0: never). A dead backend: every measure() fails at once.
  int drop_after = 0;
  bool dead = false;
  std::chrono::milliseconds delay{0};
  std::atomic<bool> cancelled_{false};

 private:
  const FakeTask& task_;
  bool shares_cpu_;
};

}  // namespace tunefarm
