#include "db/schema.h"

#include <fmt/format.h>

namespace tunefarm::db {
namespace {

// "TUNF": marks the file as a tunefarm history in SQLite's header, so that a database of another
// program given by mistake is recognised and left alone.
constexpr int64_t kApplicationId = 0x54554e46;

// Records name their job by id without a foreign key: imported records keep the job ids of the
// installation they came from. Their identity (the unique index) is what a measurement is: who
// measured which config of which task, where and when; importing the same record twice finds it.
// Its columns are ordered so that the measurement's start time, nearly unique, ends most
// comparisons before the long config text, and so that it also serves listings by workload.
constexpr std::string_view kTables = R"sql(
CREATE TABLE workloads (
  id INTEGER PRIMARY KEY,
  text TEXT NOT NULL UNIQUE
);
CREATE TABLE targets (
  id INTEGER PRIMARY KEY,
  text TEXT NOT NULL UNIQUE
);
CREATE TABLE jobs (
  id TEXT PRIMARY KEY,
  spec BLOB NOT NULL,
  state INTEGER NOT NULL,
  progress BLOB NOT NULL,
  created_at_us INTEGER NOT NULL,
  started_at_us INTEGER NOT NULL DEFAULT 0,
  finished_at_us INTEGER NOT NULL DEFAULT 0,
  error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX jobs_by_state ON jobs (state, created_at_us);
CREATE TABLE records (
  id INTEGER PRIMARY KEY,
  workload_id INTEGER NOT NULL REFERENCES workloads (id),
  target_id INTEGER NOT NULL REFERENCES targets (id),
  device_key TEXT NOT NULL,
  config TEXT NOT NULL,
  config_index INTEGER NOT NULL,
  costs TEXT NOT NULL,
  mean_cost_s REAL NOT NULL,
  gflops REAL NOT NULL,
  error_code INTEGER NOT NULL,
  error_msg TEXT NOT NULL,
  build_time_s REAL NOT NULL,
  started_at_us INTEGER NOT NULL,
  finished_at_us INTEGER NOT NULL,
  job_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  attempts INTEGER NOT NULL
);
CREATE UNIQUE INDEX records_identity
  ON records (workload_id, job_id, started_at_us, agent_id, device_key, target_id, config);
)sql";

// Best-config queries read only successful records, fastest first: partial indexes keep them
// small and already ordered, with and without a device key. Listing a job's records, and counting
// the configs it measured when it resumes, read the job index.
constexpr std::string_view kQueryIndexes = R"sql(
CREATE INDEX records_best_by_device
  ON records (workload_id, target_id, device_key, mean_cost_s) WHERE error_code = 0;
CREATE INDEX records_best
  ON records (workload_id, target_id, mean_cost_s) WHERE error_code = 0;
CREATE INDEX records_by_job ON records (job_id);
)sql";

// A config's figure takes all of its successful measurements (common/figure.h): the best query
// finds them by config. Re-measurements at the end of a job are records of their own, marked with
// their round.
constexpr std::string_view kRemeasurements = R"sql(
ALTER TABLE records ADD COLUMN remeasure_round INTEGER NOT NULL DEFAULT 0;
CREATE INDEX records_by_config
  ON records (workload_id, target_id, config, device_key, mean_cost_s) WHERE error_code = 0;
)sql";

// The target each record's candidate was compiled for: its job's target with the CPU of the key's
// agents filled in (tune-client records shows it).
constexpr std::string_view kBuiltFor = R"sql(
ALTER TABLE records ADD COLUMN built_for TEXT NOT NULL DEFAULT '';
)sql";

constexpr Migration kMigrations[] = {
    {1, "workloads, targets, jobs and records", kTables},
    {2, "indexes for best-config queries and job listings", kQueryIndexes},
    {3, "re-measurement rounds, and an index of a config's measurements", kRemeasurements},
    {4, "the target each candidate was built for", kBuiltFor},
};

Status migrate_in_transaction(Connection& connection, std::span<const Migration> steps) {
  TF_ASSIGN_OR_RETURN(int64_t application_id, connection.query_int("PRAGMA application_id"));
  TF_ASSIGN_OR_RETURN(int64_t version, connection.query_int("PRAGMA user_version"));
  TF_ASSIGN_OR_RETURN(int64_t objects, connection.query_int("SELECT count(*) FROM sqlite_master"));
  const std::string& path = connection.path();
  if (application_id != kApplicationId && (application_id != 0 || version != 0 || objects != 0)) {
    return failed_precondition(fmt::format(
        "{} is a SQLite database of another program, not a tunefarm history; tunefarm leaves it alone: "
        "choose another data directory",
        path));
  }
  int latest = steps.empty() ? 0 : steps.back().version;
  if (version > latest) {
    return failed_precondition(fmt::format(
        "history database {} has schema version {}, but this tunefarm knows versions up to {}: it was written "
        "by a newer tunefarm; upgrade, or use another data directory",
        path, version, latest));
  }
  if (application_id == 0) TF_RETURN_IF_ERROR(connection.exec(fmt::format("PRAGMA application_id = {}", kApplicationId)));
  int expected = 1;
  for (const Migration& step : steps) {
    if (step.version != expected++) {
      return internal_error(fmt::format("migration {} ('{}') is out of order", step.version, step.summary));
    }
    if (step.version <= version) continue;
    TF_RETURN_IF_ERROR(connection.exec(step.sql).with_context(
        fmt::format("migrating {} to schema version {} ({})", path, step.version, step.summary)));
    TF_RETURN_IF_ERROR(connection.exec(fmt::format("PRAGMA user_version = {}", step.version)));
  }
  return Status();
}

}  // namespace

std::span<const Migration> migrations() { return kMigrations; }

int current_schema_version() { return kMigrations[std::size(kMigrations) - 1].version; }

Status migrate(Connection& connection, std::span<const Migration> steps) {
  TF_RETURN_IF_ERROR(connection.exec("BEGIN IMMEDIATE"));
  Status status = migrate_in_transaction(connection, steps);
  if (status.ok()) status = connection.exec("COMMIT");
  if (!status.ok()) (void)connection.exec("ROLLBACK");
  return status;
}

}  // namespace tunefarm::db
