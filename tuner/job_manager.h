// Tuning jobs as a service runs them: submitted specs are validated and stored, run on their own
// threads (a bounded number at once, the rest queued), every result is written to the history as
// it arrives, progress is published to watchers, and jobs that were running when the service
// stopped resume from the records already in the database — their measured configs are never
// measured again and count towards the budget.
//
// In a history that several tunerds share (PostgreSQL: db::RecordStore::shared()), a job runs where
// its lease is held: a heartbeat renews this tunerd's leases, takes over jobs whose lease expired
// (their tunerd died) or that nobody took yet, stops a job whose lease another took, and cancels a
// job that a cancel on another tunerd asked for. A tunerd that cannot renew for two thirds of the
// lease stops its jobs before the lease can expire; the history's fences refuse whatever it still
// tries to write. Any tunerd answers for any job: the history has them all.
//
// The manager knows neither gRPC nor the compiler: a TaskFactory makes tuning tasks, a
// BackendFactory makes the measurement backend of a job, and a DeviceKeyCheck says what each agent
// serving a device key can run (an error when none serves it). tuner/service.cc wires the real ones in.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/platform.h"
#include "common/status.h"
#include "common/target.h"
#include "common/workload.h"
#include "db/record_store.h"
#include "measure/measure_options.h"
#include "search/tuning_loop.h"
#include "tunefarm/v1/tuner.pb.h"
#include "tuner/build_guard.h"

namespace tunefarm {

class TunerMetrics;

using BackendFactory = std::function<StatusOr<std::unique_ptr<MeasureBackend>>(const v1::Job& job)>;
using DeviceKeyCheck = std::function<StatusOr<std::vector<AgentPlatform>>(const std::string& device_key)>;

struct JobManagerOptions {
  int max_running_jobs = 4;
  // Jobs that may wait in the queue; more are refused, so that a flood of submits cannot bury the
  // service's work (and its history) under jobs that would take years.
  int max_queued_jobs = 100;
  // Jobs that one client (tuner/service.h says who that is) may have waiting, so that one client
  // cannot fill the whole queue and lock everyone else out.
  int max_queued_jobs_per_client = 20;
  int default_batch_size = 64;
  int build_threads = 0;           // Per job; 0: one per CPU.
  int warm_start_records = 5000;   // Recent records of the same target that train a new job's model.
  // How long a job waits for the tracker and its key's agents before it fails, unless its spec
  // says (max_wait_s); a job that failed so can be resumed.
  double max_wait_s = 3600;
  // Where jobs mark that their candidates are being compiled (tuner/build_guard.h), so that a job
  // during whose builds tunerd keeps dying is failed instead of resumed; empty: no marks. A shared
  // history keeps the marks in its jobs instead.
  std::string build_mark_dir;
  // In a shared history: this tunerd's name on its leases (empty: host, process and a random
  // number), and how long a lease lasts unrenewed, which is how soon a dead tunerd's jobs move.
  std::string lease_owner;
  std::chrono::milliseconds lease{30000};
  ModelOptions model;              // The cost model of xgb-sa jobs (its seed comes from the job).
  v1::MeasureOptions default_measure = default_tuning_measure_options();
  std::shared_ptr<TunerMetrics> metrics;  // Every job's loop counts its trials and builds here; null: none.
};

// The default batch of a job on a farm whose key has `agents` agents (0: unknown), at most `cap`.
int farm_batch_size(int agents, int cap);

// How long `job` waits for the tracker and its key's agents: its spec's limit, or the service's.
double max_wait_s(const v1::JobSpec& spec, const JobManagerOptions& defaults);

// How a stored job becomes the tuning loop's options: the spec's values, the service's defaults
// where the spec leaves them out, and a batch sized to the farm when the spec sets none.
TuningOptions tuning_options(const v1::Job& job, const JobManagerOptions& defaults, int agents);

// A job as watchers see it. `version` grows with every change; `ended` is set once the job reached
// SUCCEEDED, FAILED or CANCELLED.
struct JobUpdate {
  v1::Job job;
  std::string message;
  uint64_t version = 0;
  bool ended = false;
};

class JobManager {
 public:
  JobManager(db::RecordStore& store, TaskFactory& tasks, BackendFactory backends, DeviceKeyCheck device_check,
             JobManagerOptions options = {});
  // Stops running jobs without ending them: they resume at the next start().
  ~JobManager();

  // Picks up the jobs that were queued or running when the service last stopped.
  Status start();

  // Validates the spec (tasks, workloads, target, device key, budgets, measure options) and queues
  // the job. INVALID_ARGUMENT names the field at fault, or the device key whose agents cannot run
  // the target. `client` names who submits, for the per-client queue limit; empty: only the
  // service-wide limit applies. RESOURCE_EXHAUSTED says which limit was reached. A `request` that
  // made a job before answers that job, before any check (it was checked then, and the queue may
  // have filled since): see db::RecordStore::create_job().
  StatusOr<v1::Job> submit(const v1::JobSpec& spec, const std::string& client = {}, const db::JobRequest& request = {});
  StatusOr<v1::Job> get(const std::string& job_id);
  // Cancels a queued or running job; cancelling an ended job is FAILED_PRECONDITION.
  StatusOr<v1::Job> cancel(const std::string& job_id);
  // Queues a FAILED or CANCELLED job again; it resumes from its records. FAILED_PRECONDITION for
  // a job in another state. `client` and `submitter` name who resumes it, for the queue limits as
  // in submit(): a resume queues a job as a submit does.
  StatusOr<v1::Job> resume(const std::string& job_id, const std::string& client = {},
                           const std::string& submitter = {});
  StatusOr<std::vector<v1::Job>> list(const std::vector<v1::JobState>& states, int limit);

  // The job's state once it is newer than `after_version`, or as it is when `timeout` passes.
  StatusOr<JobUpdate> wait_for_update(const std::string& job_id, uint64_t after_version,
                                      std::chrono::milliseconds timeout);

  // Stops every running job, leaving it resumable; no new job starts afterwards.
  void shutdown();

  // Validation shared by submit() and the service's own checks; OK or INVALID_ARGUMENT.
  Status validate(const v1::JobSpec& spec) const;

 private:
  struct Running;

  // Fails a job during whose builds tunerd died kBuildCrashesBeforeFailing times in a row (as its
  // BuildGuard mark says: in build_mark_dir, or in a shared history) rather than run it again: the
  // failed job, or nothing when it may run.
  StatusOr<std::optional<v1::Job>> fail_if_builds_kept_crashing(const v1::Job& job);
  // Joins ended job threads, then starts queued jobs while there is room.
  void launch_queued_locked();
  void start_queued_locked();
  // RESOURCE_EXHAUSTED when the queue, or `client`'s share of it, is full: this tunerd's queue, or
  // in a shared history the history's (QUEUED jobs, `submitter`'s among them).
  Status check_queue_room(const std::string& client, const std::string& submitter);
  void run_job(const std::string& job_id);
  Status run_job_inner(const std::string& job_id, Running& running);
  void publish(const std::string& job_id, const v1::Job& job, std::string message);
  // While the history cannot be written, the job pauses here, saying why in `job`'s activity;
  // false when tunerd stops meanwhile.
  bool wait_for_history(const std::string& job_id, v1::Job& job, Running& running);

  // --- Leases (a shared history) ---
  // The heartbeat: renews, stops lost jobs, takes free ones; until shutdown.
  void keep_leases();
  // Takes the leases of free jobs while this tunerd has room, and queues them.
  void take_free_jobs();
  // Takes `job_id`'s lease and queues it when there is room; false when not taken.
  bool take_job(const std::string& job_id, const std::string& client);
  // Stops running (or drops from the queue) a job this tunerd no longer holds, without ending it.
  void drop_job_locked(const std::string& job_id, const std::string& why);
  // A job run elsewhere, as the history has it, once it differs from what `after_version` saw.
  StatusOr<JobUpdate> poll_remote(const std::string& job_id, uint64_t after_version, std::chrono::milliseconds timeout);

  db::RecordStore& store_;
  std::unique_ptr<BuildMarks> build_marks_;
  TaskFactory& tasks_;
  BackendFactory backends_;
  DeviceKeyCheck device_check_;
  JobManagerOptions options_;

  std::mutex mu_;
  std::condition_variable changed_;
  bool stopping_ = false;
  struct Queued {
    std::string job_id;
    std::string client;  // Empty for resumed jobs and clients without a name.
  };
  std::vector<Queued> queue_;                              // Jobs waiting to run, oldest first.
  std::map<std::string, std::unique_ptr<Running>> running_;
  std::map<std::string, JobUpdate> updates_;               // Latest state of jobs seen by this process.
  std::vector<std::thread> finished_threads_;
  std::string owner_;          // On leases, in a shared history.
  std::thread lease_thread_;   // keep_leases(), in a shared history.
};

}  // namespace tunefarm
