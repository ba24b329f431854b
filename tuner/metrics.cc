#include "tuner/metrics.h"

#include "common/http/metrics.h"

namespace tunefarm {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

TunerMetrics::TunerMetrics(prometheus::Registry& r)
    : trials_(BuildCounter()
                  .Name("tunefarm_tunerd_trials_total")
                  .Help("Trials of tuning jobs (configs measured, or refused by the compiler), by outcome")
                  .Register(r)),
      remeasurements_(BuildCounter()
                          .Name("tunefarm_tunerd_remeasurements_total")
                          .Help("Re-measurements of each job's best candidates before it names its winner, by outcome")
                          .Register(r)),
      unmeasured_(BuildCounter()
                      .Name("tunefarm_tunerd_unmeasured_candidates_total")
                      .Help("Candidates that no agent measured (DEVICE_LOST); they cost no trial")
                      .Register(r)
                      .Add({})),
      builds_(BuildCounter()
                  .Name("tunefarm_tunerd_builds_total")
                  .Help("Candidates compiled, by outcome (OK, INVALID_CONFIG, COMPILE_ERROR)")
                  .Register(r)),
      build_seconds_(BuildHistogram()
                         .Name("tunefarm_tunerd_build_seconds")
                         .Help("Time to compile one candidate")
                         .Register(r)
                         .Add({}, duration_buckets())),
      history_write_seconds_(BuildHistogram()
                                 .Name("tunefarm_tunerd_history_write_seconds")
                                 .Help("Time of one history write transaction (it holds every write queued meanwhile)")
                                 .Register(r)
                                 .Add({}, duration_buckets())),
      history_writes_(BuildCounter()
                          .Name("tunefarm_tunerd_history_writes_total")
                          .Help("Writes to the history (records, job states), by whether their transaction committed")
                          .Register(r)),
      jobs_(BuildGauge().Name("tunefarm_tunerd_jobs").Help("Jobs in the history, by state").Register(r)) {}

void TunerMetrics::trial(v1::ErrorCode error) { trials_.Add({{"error", v1::ErrorCode_Name(error)}}).Increment(); }

void TunerMetrics::remeasurement(v1::ErrorCode error) {
  remeasurements_.Add({{"error", v1::ErrorCode_Name(error)}}).Increment();
}

void TunerMetrics::unmeasured() { unmeasured_.Increment(); }

void TunerMetrics::built(v1::ErrorCode error, double seconds) {
  builds_.Add({{"result", v1::ErrorCode_Name(error)}}).Increment();
  build_seconds_.Observe(seconds);
}

void TunerMetrics::history_write(double seconds, size_t writes, bool committed) {
  history_write_seconds_.Observe(seconds);
  history_writes_.Add({{"result", committed ? "committed" : "failed"}}).Increment(static_cast<double>(writes));
}

void TunerMetrics::sample_jobs(const std::map<v1::JobState, int64_t>& counts) {
  for (int s = v1::JobState_MIN; s <= v1::JobState_MAX; ++s) {
    auto state = static_cast<v1::JobState>(s);
    if (!v1::JobState_IsValid(s) || state == v1::JOB_STATE_UNSPECIFIED) continue;
    auto it = counts.find(state);
    jobs_.Add({{"state", v1::JobState_Name(state)}}).Set(it == counts.end() ? 0 : static_cast<double>(it->second));
  }
}

}  // namespace tunefarm
