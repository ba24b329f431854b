// The tuning history: every measurement tunefarm has made (records), the jobs that made them, and
// the queries tunerd answers from them — the fastest configs for a workload on a target, record
// listings, which configs a job has already measured (so a restarted job does not measure them
// again), and JSON-lines export and import so results move between installations.
//
// One SQLite file in WAL mode, or a PostgreSQL database (a postgresql:// URL) that several tunerds
// share. All writes go through one background writer that batches them into transactions; reads
// use their own connections and never wait for it. Records added with
// add() become visible to queries once flush() returns. Every error is a Status with a message
// for people: a busy database is waited out, a damaged one is reported as such, never a crash.
// Every method may be called from any thread.
//
// Records are unique by (job, workload, config, target, device key, measurement start, agent):
// adding or importing a record that is already there is skipped, so imports can be repeated and
// a restarted job can record a result twice without counting it twice.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/target.h"
#include "common/workload.h"
#include "tunefarm/v1/tuner.pb.h"

namespace tunefarm::db {

class Connection;
class Writer;

struct RecordStoreOptions {
  // How long an operation waits out a lock held by another process before failing with
  // kUnavailable.
  std::chrono::milliseconds busy_budget{30000};
  // How open() checks the file before anything is read or measured into it: SQLite's quick_check
  // (every page readable and well-formed; seconds for millions of records) or its full
  // integrity_check (indexes against tables too; slower).
  enum class Check { kQuick, kFull };
  Check check = Check::kQuick;
  // PostgreSQL: how long the server may stay silent while a statement waits for its answer before
  // the connection is taken for broken and the call fails (kUnavailable). A hung server or a
  // network that swallows everything would otherwise hold the caller for good: a tunerd's
  // shutdown behind a lease renewal, for one. tunerd makes it its lease.
  std::chrono::milliseconds reply_timeout{60000};
  // Told after each write transaction how long it took, how many writes it held and whether it
  // committed (tunerd's history-write metrics); on the writer's thread, so it must not block.
  std::function<void(double seconds, size_t writes, bool committed)> on_commit;
};

// Which records a listing or an export covers; unset fields match everything.
struct RecordFilter {
  std::optional<Workload> workload = std::nullopt;
  std::optional<Target> target = std::nullopt;
  std::string device_key = {};
  std::string job_id = {};
};

struct RecordPage {
  std::vector<v1::Record> records;  // Oldest first.
  int64_t total = 0;                // Matching records in all, regardless of limit and offset.
  // Nonzero when the byte bound cut the page short of its limit: the offset of the first matching
  // record left out.
  int64_t next_offset = 0;
};

// A job's lease as renew_leases() finds it.
struct LeaseRenewal {
  std::string job_id;
  bool held = false;              // False: another tunerd took it over, or the job ended.
  bool cancel_requested = false;  // A tunerd was asked to cancel the job (request_cancel()).
};

// The generations of the leases this store holds: every write about one of these jobs checks, in
// its own transaction, that the job's lease is still at that generation.
struct LeaseFences;

// Who asked for a job and under which request id (SubmitJob's): a submit that names a request
// already made answers the job it made rather than a second one (create_job()).
struct JobRequest {
  // Whose request ids these are: one submitter cannot reach another's jobs through them. Empty on
  // a service without tokens, where every client is the same one.
  std::string submitter;
  // Empty: the submit makes a new job whatever came before. At most 128 printable ASCII characters
  // without spaces.
  std::string request_id;
};

struct CreatedJob {
  v1::Job job;
  bool created = false;  // False: the request had made `job` before.
};

struct ImportStats {
  int64_t imported = 0;
  int64_t skipped = 0;  // Already present.
};

class RecordStore {
 public:
  // Opens the history at `path` (a SQLite file, or a PostgreSQL URL without a password: see
  // db/postgres.h), creating it when absent and migrating an older schema. Fails with a clear error
  // when the file is damaged, truncated, belongs to another program or was written by a newer
  // tunefarm, or when the PostgreSQL server cannot be reached.
  static StatusOr<std::unique_ptr<RecordStore>> open(const std::string& path, RecordStoreOptions options = {});
  // Commits everything queued.
  ~RecordStore();
  RecordStore(const RecordStore&) = delete;
  RecordStore& operator=(const RecordStore&) = delete;

  const std::string& path() const { return path_; }

  // --- Records -----------------------------------------------------------------------------
  // Validates `records` and queues them as one unit: they are committed together or not at all.
  // A record that fails validation refuses the whole call, naming the record.
  Status add(const std::vector<v1::Record>& records);
  // Waits until everything queued is committed; answers the first failed write since the last
  // flush().
  Status flush();
  // OK while the history can be written; otherwise why not, since when (a full disk). Records
  // added meanwhile are held and written once it can be written again.
  Status write_outage() const;
  // add() and wait: answers how many records were new (the others were already present).
  StatusOr<int64_t> insert(const std::vector<v1::Record>& records);

  // The `top_k` best configs of `workload` on `target` by their figure (common/figure.h: the upper
  // median of a config's successful measurements on one device key), best first, each as the
  // record of the measurement that is its figure; on one device key, or on any when `device_key`
  // is empty; `top_k` 0 means 1, at most 1000. Failed records never appear.
  StatusOr<std::vector<v1::Record>> query_best(const Workload& workload, const Target& target,
                                               std::string_view device_key = {}, int top_k = 1);
  // Matching records, oldest first; `limit` 0 means 1000, at most 100000 (export reads more).
  // `max_bytes` > 0 also bounds the page by the records' size as a repeated protobuf field
  // encodes them: the page ends before the record that would pass it, but holds at least one, so
  // that paging always moves on. Records past the bound are not read at all.
  StatusOr<RecordPage> list_records(const RecordFilter& filter, int64_t limit = 0, int64_t offset = 0,
                                    size_t max_bytes = 0);
  // The distinct configs (stable JSON) that job `job_id` has recorded for `workload`, successful or
  // not, in the order they were first recorded. This is what a resumed job must not measure again.
  StatusOr<std::vector<std::string>> measured_configs(std::string_view job_id, const Workload& workload);
  // How many distinct configs job `job_id` has recorded, over all its workloads.
  StatusOr<int64_t> count_measured_configs(std::string_view job_id);

  // --- Export and import ---------------------------------------------------------------------
  // Calls `sink` with each matching record, oldest first; a sink error stops the export.
  Status export_records(const RecordFilter& filter, const std::function<Status(const v1::Record&)>& sink);
  // Writes matching records as JSON lines, one v1::Record a line.
  Status export_jsonl(const RecordFilter& filter, std::ostream& out);
  // Reads JSON lines (blank lines ignored) and adds the records not already present. Every line
  // is checked before anything is written: a bad line refuses the import with an error naming
  // `source` and the line number. `in` must be seekable (a file or a string stream).
  // `check`, when given, is asked about every record too (e.g. whether its config is a point of its
  // template's space, which the history cannot know).
  StatusOr<ImportStats> import_jsonl(std::istream& in, std::string_view source,
                                     const std::function<Status(const v1::Record&)>& check = nullptr);

  // --- Jobs ----------------------------------------------------------------------------------
  // Stores a new job in state QUEUED with a fresh id. The spec needs at least one task, every
  // workload and the target must parse, and the budget must be positive; the service checks the
  // rest (device keys, strategies).
  StatusOr<v1::Job> create_job(const v1::JobSpec& spec);
  // The same for a submit that names its request: when `request` (its submitter and request id)
  // has made a job already, that job, whatever state it is in, and nothing new is stored. Two
  // submits of one request at once, on one tunerd or on two sharing the history, get one job: the
  // history's unique index decides, and the one that lost reads the winner's job back.
  // ALREADY_EXISTS naming the job when the request made a job of another spec.
  StatusOr<CreatedJob> create_job(const v1::JobSpec& spec, const JobRequest& request);
  // The job `request` made, if any, checked as create_job() checks it: ALREADY_EXISTS when its
  // spec is not `spec` (the build target, which tunerd fills in, aside).
  StatusOr<std::optional<v1::Job>> find_requested_job(const JobRequest& request, const v1::JobSpec& spec);
  // Moves a job to `state`, stamping started_at on the first RUNNING and finished_at on an end
  // state. An ended job (SUCCEEDED, FAILED, CANCELLED) does not change again. `error` replaces
  // the stored reason: why the job failed, empty otherwise.
  StatusOr<v1::Job> update_job_state(std::string_view job_id, v1::JobState state, std::string_view error = {});
  // Puts a FAILED or CANCELLED job back in the queue (QUEUED, its error and finished_at cleared)
  // so that it runs again from its records; FAILED_PRECONDITION for a job in any other state.
  StatusOr<v1::Job> reopen_job(std::string_view job_id);
  Status update_job_progress(std::string_view job_id, const v1::JobProgress& progress);
  StatusOr<v1::Job> get_job(std::string_view job_id);
  // Jobs in any of `states` (all when empty), newest first; `limit` 0 means 100.
  StatusOr<std::vector<v1::Job>> list_jobs(const std::vector<v1::JobState>& states, int limit = 0);
  // How many jobs are in each state, over the whole history.
  StatusOr<std::map<v1::JobState, int64_t>> count_jobs_by_state();
  // How many jobs wait in the queue (QUEUED) over the whole history, and how many of them
  // `submitter` submitted: the queue that the tunerds sharing a history serve together.
  struct QueuedJobs {
    int64_t total = 0;
    int64_t of_submitter = 0;
  };
  StatusOr<QueuedJobs> count_queued_jobs(std::string_view submitter);
  // Stores `job` as it is (id, state, times, progress) with the submit `request` that made it,
  // when no job has its id: how a history moves to another database. Answers whether it was
  // stored. A request id that another job of the destination has (two histories merged into one)
  // stays that job's: this one is stored without it.
  StatusOr<bool> put_job(const v1::Job& job, const JobRequest& request = {});
  // The submit requests that made jobs, by job id: the jobs submitted with a request id.
  StatusOr<std::map<std::string, JobRequest>> job_requests();
  // The build mark of a job (tuner/build_guard.h) in a shared history: how many times in a row a
  // tunerd died while the job's candidates were compiling, counting a build under way; 0 when no
  // build is. Written under the job's lease (fenced). FAILED_PRECONDITION on a history that is not
  // shared, whose tunerd keeps the marks in its data directory.
  StatusOr<int64_t> build_crashes(std::string_view job_id);
  Status set_build_crashes(std::string_view job_id, int64_t crashes);

  // --- Leases: the jobs of a history that several tunerds share (PostgreSQL) ----------------
  // A queued or running job is run by the tunerd that holds its lease: an owner, an expiry on the
  // database server's clock, and a generation that grows with every new holder. While this store
  // holds a lease, each of its writes about that job (records, state, progress) is fenced: it
  // commits only if the lease is still at the generation taken, and otherwise fails with
  // FAILED_PRECONDITION, so that a tunerd whose lease was taken over can never write for the job.
  // On SQLite (one tunerd owns the file) shared() is false and jobs need no leases.
  bool shared() const;
  // Takes the lease of a QUEUED or RUNNING job whose lease is free or expired, for `owner`, for
  // `duration`; answers its generation, or nothing when another holds it or the job has ended.
  StatusOr<std::optional<int64_t>> acquire_lease(std::string_view job_id, std::string_view owner,
                                                 std::chrono::milliseconds duration);
  // Extends every lease this store holds by `duration` from now, answering for each whether it is
  // still held and whether a cancel was requested. A lease no longer held fails every write about
  // its job (its generation moved on) until forget_lease(), and after it too where another holds it.
  StatusOr<std::vector<LeaseRenewal>> renew_leases(std::string_view owner, std::chrono::milliseconds duration);
  // Gives the lease up so that another tunerd may take the job at once (the job keeps its state).
  // While the history cannot be written (write_outage()), only stops fencing and answers why.
  Status release_lease(std::string_view job_id);
  // Stops renewing the lease of `job_id` without touching the database (after it was lost). Writes
  // about the job stay fenced at the generation it had: they commit only while nobody else took it.
  void forget_lease(std::string_view job_id);
  // QUEUED and RUNNING jobs whose lease is free or expired, oldest first: jobs to take over.
  StatusOr<std::vector<std::string>> unleased_jobs(int limit);
  // Cancels a job for any tunerd: one that nobody runs (no live lease) becomes CANCELLED at once;
  // one that a tunerd runs is marked, and that tunerd cancels it when it renews its lease.
  // FAILED_PRECONDITION for a job that has ended.
  StatusOr<v1::Job> request_cancel(std::string_view job_id);

 private:
  RecordStore(std::string path, RecordStoreOptions options, std::unique_ptr<Writer> writer);

  // Runs `read` in one read transaction on a reader connection, retrying while the database is
  // busy; `read` must start from scratch each time it is called. kOneStatement: `read` runs a single
  // statement on PostgreSQL, which sees one snapshot by itself: it runs outside a transaction, in
  // one round trip to the server instead of three (BEGIN and COMMIT are a round trip each, and on a
  // busy machine each round trip is a wake-up of the server's process to wait for).
  enum class Reads { kSeveral, kOneStatement };
  Status with_reader(const std::function<Status(Connection&)>& read, Reads reads = Reads::kSeveral);

  std::string path_;
  RecordStoreOptions options_;
  std::shared_ptr<LeaseFences> fences_;
  std::unique_ptr<Writer> writer_;
  std::mutex readers_mutex_;
  std::vector<std::unique_ptr<Connection>> idle_readers_;
};

}  // namespace tunefarm::db
