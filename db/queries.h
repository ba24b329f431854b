// The SQL of the record queries that must stay fast, in one place so that tests can check with
// EXPLAIN QUERY PLAN that SQLite answers them from an index without sorting (and PostgreSQL's,
// with EXPLAIN, that it uses its indexes too).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "tunefarm/v1/tuner.pb.h"

namespace tunefarm::db {

class Statement;

// Columns of a record row: id, workload text, target text, then the records columns.
inline constexpr std::string_view kSelectRecord =
    "SELECT r.id, w.text, t.text, r.device_key, r.config, r.config_index, r.costs, r.mean_cost_s, r.gflops, "
    "r.error_code, r.error_msg, r.build_time_s, r.started_at_us, r.finished_at_us, r.job_id, r.agent_id, "
    "r.attempts, r.remeasure_round, r.built_for "
    "FROM records r JOIN workloads w ON w.id = r.workload_id JOIN targets t ON t.id = r.target_id ";

// The record of a row selected by kSelectRecord; DATA_LOSS for a row that does not parse.
StatusOr<v1::Record> read_record(const Statement& stmt);

// Columns of a job row, in the order read_job() reads them.
inline constexpr std::string_view kSelectJob =
    "SELECT id, spec, state, progress, created_at_us, started_at_us, finished_at_us, error FROM jobs ";

// The job of a row selected by kSelectJob; DATA_LOSS for a row that does not parse.
StatusOr<v1::Job> read_job(const Statement& stmt);

// The fastest successful records: ?1 workload text, ?2 target text, ?3 how many, ?4 device key
// (only `by_device`).
inline std::string best_query_sql(bool by_device) {
  std::string sql(kSelectRecord);
  sql +=
      "WHERE r.workload_id = (SELECT id FROM workloads WHERE text = ?1) "
      "AND r.target_id = (SELECT id FROM targets WHERE text = ?2) AND r.error_code = 0 ";
  if (by_device) sql += "AND r.device_key = ?4 ";
  sql += "ORDER BY r.mean_cost_s, r.id LIMIT ?3";
  return sql;
}

// Every successful measurement of one config: ?1 workload text, ?2 target text, ?3 config (stable
// JSON), ?4 device key; fastest first.
inline std::string config_measurements_sql() {
  std::string sql(kSelectRecord);
  sql +=
      "WHERE r.workload_id = (SELECT id FROM workloads WHERE text = ?1) "
      "AND r.target_id = (SELECT id FROM targets WHERE text = ?2) AND r.config = ?3 AND r.device_key = ?4 "
      "AND r.error_code = 0 ORDER BY r.mean_cost_s";
  return sql;
}

// At least `wanted` candidates, rounded up to 64 times 2^k or 1.5 x 2^k, so that the best queries
// of any top k take a dozen statement shapes per connection, not one per top k.
inline int64_t figures_candidates(int64_t wanted) {
  int64_t n = 64;
  while (n < wanted) n = (n & (n - 1)) == 0 ? n / 2 * 3 : n / 3 * 4;
  return n;
}

// The figures (common/figure.h) of the configs of the `candidates` fastest measurements (as
// best_query_sql() finds them, same parameters but ?3, and ?5 how many figures), best first, each as
// the record of the measurement that is its figure: what PostgreSQL answers a best query with, in one
// round trip and one row per figure. A config's figure is the upper median of its successful
// measurements, the one at place n / 2 (from 0) in the order (cost, id); of measurements of equal
// cost, the oldest stands for it, as query_best() picks on SQLite: the group of equal cost that spans
// that place (from its rank to the count up to its cost) gives its oldest.
//
// Each candidate config's measurements are read by a lateral subquery, which PostgreSQL cannot turn
// into a join: as a join, it hashed every measurement of the task (3000 at 1M records) to find those
// of ten configs. The indexes hold the columns these read (schema.cc), so no table row is read
// before the answer's own.
//
// The number of candidates is written into the SQL rather than bound: PostgreSQL plans a prepared
// statement once (a generic plan) only where that plan is estimated no dearer than a plan made for
// the values, and a bound LIMIT is estimated at a tenth of the rows, which across all device keys
// made the generic plan dearer, so that every call was planned again (0.8 ms of its 1.8). Each
// number makes a statement of its own on each connection: figures_candidates() rounds it up.
inline std::string best_figures_sql(bool by_device, int64_t candidates) {
  std::string sql =
      "WITH fastest AS (SELECT r.device_key, r.config FROM records r "
      "WHERE r.workload_id = (SELECT id FROM workloads WHERE text = ?1) "
      "AND r.target_id = (SELECT id FROM targets WHERE text = ?2) AND r.error_code = 0 ";
  if (by_device) sql += "AND r.device_key = ?4 ";
  sql += "ORDER BY r.mean_cost_s, r.id LIMIT " + std::to_string(candidates) + "), ";
  sql +=
      "chosen AS (SELECT f.id FROM (SELECT DISTINCT device_key, config FROM fastest) c CROSS JOIN LATERAL ("
      "SELECT min(m.id) AS id FROM (SELECT r.id, rank() OVER cost AS first, count(*) OVER cost AS last, "
      "count(*) OVER () AS n FROM records r WHERE r.workload_id = (SELECT id FROM workloads WHERE text = ?1) "
      "AND r.target_id = (SELECT id FROM targets WHERE text = ?2) AND r.error_code = 0 "
      "AND r.config = c.config AND r.device_key = c.device_key WINDOW cost AS (ORDER BY r.mean_cost_s)) m "
      "WHERE m.first <= m.n / 2 + 1 AND m.n / 2 + 1 <= m.last) f) ";
  sql += kSelectRecord;
  sql += "WHERE r.id IN (SELECT id FROM chosen) ORDER BY r.mean_cost_s, r.id LIMIT ?5";
  return sql;
}

}  // namespace tunefarm::db
