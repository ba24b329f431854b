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

// The figures (common/figure.h) of the configs of the fastest measurements (as best_query_sql()
// finds them, same parameters, and ?5 how many figures), best first, each as the record of the
// measurement that is its figure: what PostgreSQL answers a best query with, in one round trip and
// one row per figure. A config's figure is the upper median of its successful measurements, the
// one at place n / 2 (from 0) in the order (cost, id); of measurements of equal cost, the oldest
// stands for it, as query_best() picks on SQLite.
inline std::string best_figures_sql(bool by_device) {
  std::string sql =
      "WITH fastest AS (SELECT r.device_key, r.config FROM records r "
      "WHERE r.workload_id = (SELECT id FROM workloads WHERE text = ?1) "
      "AND r.target_id = (SELECT id FROM targets WHERE text = ?2) AND r.error_code = 0 ";
  if (by_device) sql += "AND r.device_key = ?4 ";
  sql +=
      "ORDER BY r.mean_cost_s, r.id LIMIT ?3), candidates AS (SELECT DISTINCT device_key, config FROM fastest), "
      "measured AS (SELECT r.id, r.device_key, r.config, r.mean_cost_s, "
      "row_number() OVER (PARTITION BY r.device_key, r.config ORDER BY r.mean_cost_s, r.id) AS place, "
      "count(*) OVER (PARTITION BY r.device_key, r.config) AS n FROM records r "
      "JOIN candidates c ON c.device_key = r.device_key AND c.config = r.config "
      "WHERE r.workload_id = (SELECT id FROM workloads WHERE text = ?1) "
      "AND r.target_id = (SELECT id FROM targets WHERE text = ?2) AND r.error_code = 0), "
      "figures AS (SELECT device_key, config, mean_cost_s FROM measured WHERE place = n / 2 + 1), "
      "chosen AS (SELECT min(m.id) AS id FROM measured m JOIN figures f ON f.device_key = m.device_key "
      "AND f.config = m.config AND f.mean_cost_s = m.mean_cost_s GROUP BY m.device_key, m.config) ";
  sql += kSelectRecord;
  sql += "WHERE r.id IN (SELECT id FROM chosen) ORDER BY r.mean_cost_s, r.id LIMIT ?5";
  return sql;
}

}  // namespace tunefarm::db
