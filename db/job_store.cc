// The jobs half of RecordStore: a job's spec and progress are kept as proto bytes (what the
// service sends and receives, forward compatible), its state and timestamps as columns so that
// listing by state is an index scan.
#include <chrono>
#include <random>
#include <set>

#include <fmt/format.h>
#include <google/protobuf/util/message_differencer.h>

#include "common/wire/wire.h"
#include "db/queries.h"

#include "db/lease_fences.h"
#include "db/record_store.h"
#include "db/sqlite.h"
#include "db/writer.h"

namespace tunefarm::db {

StatusOr<v1::Job> read_job(const Statement& stmt) {
  v1::Job job;
  job.set_id(std::string(stmt.column_text(0)));
  std::string_view spec = stmt.column_blob(1);
  std::string_view progress = stmt.column_blob(3);
  int64_t state = stmt.column_int(2);
  if (!job.mutable_spec()->ParseFromArray(spec.data(), static_cast<int>(spec.size())) ||
      !job.mutable_progress()->ParseFromArray(progress.data(), static_cast<int>(progress.size())) ||
      !v1::JobState_IsValid(static_cast<int>(state))) {
    return Status(StatusCode::kDataLoss, fmt::format("job {} in the history does not parse; the database was "
                                                     "changed outside tunefarm or is damaged",
                                                     job.id()));
  }
  job.set_state(static_cast<v1::JobState>(state));
  job.set_created_at_us(stmt.column_int(4));
  job.set_started_at_us(stmt.column_int(5));
  job.set_finished_at_us(stmt.column_int(6));
  job.set_error(std::string(stmt.column_text(7)));
  return job;
}

namespace {

constexpr int kDefaultJobLimit = 100;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string new_job_id() {
  static std::mutex mutex;
  static std::mt19937_64 random(std::random_device{}());
  std::lock_guard lock(mutex);
  return fmt::format("job-{:012x}", random() & 0xffffffffffff);
}

bool has_ended(v1::JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

Status check_spec(const v1::JobSpec& spec) {
  if (spec.tasks().empty()) return invalid_argument("job spec has no tasks: give at least one workload");
  for (int i = 0; i < spec.tasks_size(); ++i) {
    auto workload = from_proto(spec.tasks(i).workload());
    if (!workload.ok()) return workload.status().with_context(fmt::format("job spec task {}", i + 1));
  }
  auto target = from_proto(spec.target());
  if (!target.ok()) return target.status().with_context("job spec target");
  if (spec.trials() <= 0) return invalid_argument(fmt::format("job spec trials is {}; it must be > 0", spec.trials()));
  return Status();
}

Status check_request(const JobRequest& request) {
  if (request.request_id.size() > 128)
    return invalid_argument(fmt::format("request id is {} characters long, at most 128", request.request_id.size()));
  for (char c : request.request_id)
    if (c <= ' ' || c > '~')
      return invalid_argument("a request id may hold only printable ASCII characters, no spaces");
  return Status();
}

// A job's row by its request: the partial unique index (request_id <> '') answers it.
const std::string kRequestedJobSql =
    std::string(kSelectJob) + "WHERE submitter = ?1 AND request_id = ?2 AND request_id <> ''";

// Whether two specs ask for the same job; the build target and the stream figure are tunerd's,
// filled in from the agents of the device key, which may have changed between the two.
bool same_request(v1::JobSpec a, v1::JobSpec b) {
  a.clear_build_target();
  b.clear_build_target();
  a.clear_stream_bytes_per_s();
  b.clear_stream_bytes_per_s();
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

// A job's state as the writer's transaction sees it; NOT_FOUND for a job that does not exist.
StatusOr<v1::JobState> state_of(Connection& connection, std::string_view job_id) {
  TF_ASSIGN_OR_RETURN(Statement select, connection.prepare("SELECT state FROM jobs WHERE id = ?1"));
  select.bind(1, job_id);
  TF_ASSIGN_OR_RETURN(bool found, select.step());
  if (!found) return not_found(fmt::format("job {} does not exist", job_id));
  return static_cast<v1::JobState>(select.column_int(0));
}

}  // namespace

StatusOr<v1::Job> RecordStore::create_job(const v1::JobSpec& spec) {
  TF_ASSIGN_OR_RETURN(CreatedJob created, create_job(spec, JobRequest{}));
  return std::move(created.job);
}

StatusOr<CreatedJob> RecordStore::create_job(const v1::JobSpec& spec, const JobRequest& request) {
  TF_RETURN_IF_ERROR(check_spec(spec));
  TF_RETURN_IF_ERROR(check_request(request));
  std::string spec_bytes = spec.SerializeAsString();
  std::string progress_bytes = v1::JobProgress().SerializeAsString();
  int64_t created = now_us();
  // A fresh id collides with a stored one about never; trying a few is cheaper than reasoning.
  for (int attempt = 0;; ++attempt) {
    std::string id = new_job_id();
    // Answers 1 when the job was stored, 0 when its request had made one already. ON CONFLICT
    // rather than a look first: of two submits of one request at once, PostgreSQL holds the second
    // insert until the first commits, and READ COMMITTED's next statement then sees the first's row.
    auto stored = writer_->submit([&](Connection& connection) -> StatusOr<int64_t> {
      TF_ASSIGN_OR_RETURN(Statement stmt,
                          connection.prepare("INSERT INTO jobs (id, spec, state, progress, created_at_us, submitter, "
                                             "request_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING"));
      stmt.bind(1, id);
      stmt.bind_blob(2, spec_bytes);
      stmt.bind(3, int64_t{v1::QUEUED});
      stmt.bind_blob(4, progress_bytes);
      stmt.bind(5, created);
      stmt.bind(6, request.submitter);
      stmt.bind(7, request.request_id);
      TF_RETURN_IF_ERROR(stmt.run());
      if (connection.changes() > 0) return 1;
      if (!request.request_id.empty()) {
        TF_ASSIGN_OR_RETURN(Statement made, connection.prepare(kRequestedJobSql));
        made.bind(1, request.submitter);
        made.bind(2, request.request_id);
        TF_ASSIGN_OR_RETURN(bool found, made.step());
        if (found) return 0;
      }
      return Status(StatusCode::kAlreadyExists, fmt::format("job id {} is taken", id));
    }).get();
    if (stored.ok() && *stored > 0) {
      TF_ASSIGN_OR_RETURN(v1::Job job, get_job(id));
      return CreatedJob{std::move(job), true};
    }
    if (stored.ok()) {
      TF_ASSIGN_OR_RETURN(std::optional<v1::Job> earlier, find_requested_job(request, spec));
      if (!earlier) return internal_error(fmt::format("request id '{}' made a job that cannot be read back", request.request_id));
      return CreatedJob{std::move(*earlier), false};
    }
    if (stored.status().code() != StatusCode::kAlreadyExists || attempt == 3) return stored.status();
  }
}

StatusOr<std::optional<v1::Job>> RecordStore::find_requested_job(const JobRequest& request, const v1::JobSpec& spec) {
  TF_RETURN_IF_ERROR(check_request(request));
  if (request.request_id.empty()) return std::optional<v1::Job>();
  std::optional<v1::Job> job;
  TF_RETURN_IF_ERROR(with_reader([&](Connection& connection) -> Status {
    job.reset();
    TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare(kRequestedJobSql));
    stmt.bind(1, request.submitter);
    stmt.bind(2, request.request_id);
    TF_ASSIGN_OR_RETURN(bool found, stmt.step());
    if (!found) return Status();
    TF_ASSIGN_OR_RETURN(job, read_job(stmt));
    return Status();
  }, Reads::kOneStatement));
  if (job && !same_request(job->spec(), spec))
    return Status(StatusCode::kAlreadyExists, fmt::format(
        "request id '{}' already made job {}, with another spec; a submit sent again must send the same spec, and a "
        "new job needs a new request id",
        request.request_id, job->id()));
  return job;
}

StatusOr<bool> RecordStore::put_job(const v1::Job& job, const JobRequest& request) {
  TF_RETURN_IF_ERROR(check_spec(job.spec()).with_context(fmt::format("job {}", job.id())));
  if (!v1::JobState_IsValid(job.state()) || job.state() == v1::JOB_STATE_UNSPECIFIED)
    return invalid_argument(fmt::format("job {} has no valid state", job.id()));
  std::string spec_bytes = job.spec().SerializeAsString();
  std::string progress_bytes = job.progress().SerializeAsString();
  auto stored = writer_->submit([&](Connection& connection) -> StatusOr<int64_t> {
    bool request_taken = false;
    if (!request.request_id.empty()) {
      TF_ASSIGN_OR_RETURN(Statement taken, connection.prepare("SELECT id FROM jobs WHERE submitter = ?1 AND "
                                                              "request_id = ?2 AND id <> ?3"));
      taken.bind(1, request.submitter);
      taken.bind(2, request.request_id);
      taken.bind(3, job.id());
      TF_ASSIGN_OR_RETURN(request_taken, taken.step());
    }
    TF_ASSIGN_OR_RETURN(Statement stmt,
                        connection.prepare("INSERT INTO jobs (id, spec, state, progress, created_at_us, started_at_us, "
                                           "finished_at_us, error, submitter, request_id) VALUES (?1, ?2, ?3, ?4, ?5, "
                                           "?6, ?7, ?8, ?9, ?10) ON CONFLICT DO NOTHING"));
    stmt.bind(1, job.id());
    stmt.bind_blob(2, spec_bytes);
    stmt.bind(3, int64_t{job.state()});
    stmt.bind_blob(4, progress_bytes);
    stmt.bind(5, job.created_at_us());
    stmt.bind(6, job.started_at_us());
    stmt.bind(7, job.finished_at_us());
    stmt.bind(8, job.error());
    stmt.bind(9, request_taken ? std::string_view() : std::string_view(request.submitter));
    stmt.bind(10, request_taken ? std::string_view() : std::string_view(request.request_id));
    TF_RETURN_IF_ERROR(stmt.run());
    return connection.changes();
  }).get();
  TF_RETURN_IF_ERROR(stored.status());
  return *stored > 0;
}

StatusOr<std::map<std::string, JobRequest>> RecordStore::job_requests() {
  std::map<std::string, JobRequest> requests;
  TF_RETURN_IF_ERROR(with_reader([&](Connection& connection) -> Status {
    requests.clear();
    TF_ASSIGN_OR_RETURN(Statement stmt,
                        connection.prepare("SELECT id, submitter, request_id FROM jobs WHERE request_id <> ''"));
    for (;;) {
      TF_ASSIGN_OR_RETURN(bool row, stmt.step());
      if (!row) return Status();
      requests[std::string(stmt.column_text(0))] =
          JobRequest{std::string(stmt.column_text(1)), std::string(stmt.column_text(2))};
    }
  }));
  return requests;
}

StatusOr<v1::Job> RecordStore::update_job_state(std::string_view job_id, v1::JobState state, std::string_view error) {
  if (!v1::JobState_IsValid(state) || state == v1::JOB_STATE_UNSPECIFIED) {
    return invalid_argument(fmt::format("job state {} is not a state a job can be in", static_cast<int>(state)));
  }
  int64_t now = now_us();
  auto updated = writer_->submit([&](Connection& connection) -> StatusOr<int64_t> {
    TF_RETURN_IF_ERROR(check_fence(connection, fences_.get(), job_id));
    TF_ASSIGN_OR_RETURN(v1::JobState current, state_of(connection, job_id));
    if (has_ended(current)) {
      return failed_precondition(fmt::format("job {} has already ended ({}); its state does not change", job_id,
                                             v1::JobState_Name(current)));
    }
    TF_ASSIGN_OR_RETURN(Statement update,
                        connection.prepare("UPDATE jobs SET state = ?2, "
                                           "started_at_us = CASE WHEN ?2 = ?5 AND started_at_us = 0 THEN ?3 "
                                           "ELSE started_at_us END, "
                                           "finished_at_us = CASE WHEN ?6 <> 0 THEN ?3 ELSE finished_at_us END, "
                                           "error = ?4 WHERE id = ?1"));
    update.bind(1, job_id);
    update.bind(2, int64_t{state});
    update.bind(3, now);
    update.bind(4, error);
    update.bind(5, int64_t{v1::RUNNING});
    update.bind(6, int64_t{has_ended(state)});
    TF_RETURN_IF_ERROR(update.run());
    return connection.changes();
  }).get();
  TF_RETURN_IF_ERROR(updated.status());
  return get_job(job_id);
}

StatusOr<v1::Job> RecordStore::reopen_job(std::string_view job_id) {
  auto updated = writer_->submit([&](Connection& connection) -> StatusOr<int64_t> {
    TF_ASSIGN_OR_RETURN(v1::JobState current, state_of(connection, job_id));
    if (current != v1::FAILED && current != v1::CANCELLED)
      return failed_precondition(fmt::format("job {} is {}: only a FAILED or CANCELLED job can be resumed", job_id,
                                             v1::JobState_Name(current)));
    TF_ASSIGN_OR_RETURN(Statement update, connection.prepare("UPDATE jobs SET state = ?2, finished_at_us = 0, "
                                                             "error = '' WHERE id = ?1"));
    update.bind(1, job_id);
    update.bind(2, int64_t{v1::QUEUED});
    TF_RETURN_IF_ERROR(update.run());
    return connection.changes();
  }).get();
  TF_RETURN_IF_ERROR(updated.status());
  return get_job(job_id);
}

Status RecordStore::update_job_progress(std::string_view job_id, const v1::JobProgress& progress) {
  std::string bytes = progress.SerializeAsString();
  auto updated = writer_->submit([&](Connection& connection) -> StatusOr<int64_t> {
    TF_RETURN_IF_ERROR(check_fence(connection, fences_.get(), job_id));
    TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare("UPDATE jobs SET progress = ?2 WHERE id = ?1"));
    stmt.bind(1, job_id);
    stmt.bind_blob(2, bytes);
    TF_RETURN_IF_ERROR(stmt.run());
    if (connection.changes() == 0) return not_found(fmt::format("job {} does not exist", job_id));
    return connection.changes();
  }).get();
  return updated.status();
}

StatusOr<v1::Job> RecordStore::get_job(std::string_view job_id) {
  v1::Job job;
  TF_RETURN_IF_ERROR(with_reader([&](Connection& connection) -> Status {
    TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare(std::string(kSelectJob) + "WHERE id = ?1"));
    stmt.bind(1, job_id);
    TF_ASSIGN_OR_RETURN(bool found, stmt.step());
    if (!found) return not_found(fmt::format("job {} does not exist", job_id));
    TF_ASSIGN_OR_RETURN(job, read_job(stmt));
    return Status();
  }, Reads::kOneStatement));
  return job;
}

StatusOr<std::vector<v1::Job>> RecordStore::list_jobs(const std::vector<v1::JobState>& states, int limit) {
  if (limit < 0) return invalid_argument(fmt::format("limit {} is negative", limit));
  if (limit == 0) limit = kDefaultJobLimit;
  // Distinct states only: the query's text (and so the statement cache) stays bounded.
  std::set<v1::JobState> wanted;
  for (v1::JobState state : states) {
    if (!v1::JobState_IsValid(state) || state == v1::JOB_STATE_UNSPECIFIED) {
      return invalid_argument(fmt::format("job state {} is not a state a job can be in", static_cast<int>(state)));
    }
    wanted.insert(state);
  }
  std::vector<v1::JobState> distinct(wanted.begin(), wanted.end());
  std::string sql(kSelectJob);
  for (size_t i = 0; i < distinct.size(); ++i) sql += fmt::format("{}?{}", i == 0 ? "WHERE state IN (" : ", ", i + 2);
  if (!distinct.empty()) sql += ") ";
  sql += "ORDER BY created_at_us DESC, rowid DESC LIMIT ?1";
  std::vector<v1::Job> jobs;
  TF_RETURN_IF_ERROR(with_reader([&](Connection& connection) -> Status {
    jobs.clear();
    TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare(sql));
    stmt.bind(1, int64_t{limit});
    for (size_t i = 0; i < distinct.size(); ++i) stmt.bind(static_cast<int>(i + 2), int64_t{distinct[i]});
    for (;;) {
      TF_ASSIGN_OR_RETURN(bool row, stmt.step());
      if (!row) return Status();
      TF_ASSIGN_OR_RETURN(v1::Job job, read_job(stmt));
      jobs.push_back(std::move(job));
    }
  }));
  return jobs;
}

StatusOr<RecordStore::QueuedJobs> RecordStore::count_queued_jobs(std::string_view submitter) {
  QueuedJobs queued;
  TF_RETURN_IF_ERROR(with_reader([&](Connection& connection) -> Status {
    TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare("SELECT COUNT(*), COALESCE(SUM(CASE WHEN submitter = ?2 THEN 1 "
                                                           "ELSE 0 END), 0) FROM jobs WHERE state = ?1"));
    stmt.bind(1, int64_t{v1::QUEUED});
    stmt.bind(2, submitter);
    TF_ASSIGN_OR_RETURN(bool row, stmt.step());
    if (row) queued = {stmt.column_int(0), stmt.column_int(1)};
    return Status();
  }, Reads::kOneStatement));
  return queued;
}

StatusOr<std::map<v1::JobState, int64_t>> RecordStore::count_jobs_by_state() {
  std::map<v1::JobState, int64_t> counts;
  TF_RETURN_IF_ERROR(with_reader([&](Connection& connection) -> Status {
    counts.clear();
    TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare("SELECT state, COUNT(*) FROM jobs GROUP BY state"));
    for (;;) {
      TF_ASSIGN_OR_RETURN(bool row, stmt.step());
      if (!row) return Status();
      int64_t state = stmt.column_int(0);
      if (v1::JobState_IsValid(static_cast<int>(state))) counts[static_cast<v1::JobState>(state)] = stmt.column_int(1);
    }
  }));
  return counts;
}

}  // namespace tunefarm::db
