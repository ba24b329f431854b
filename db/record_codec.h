// How a v1::Record is checked, stored and written out. A record is validated once, on its way in,
// and stored in canonical form: workload and target as their canonical strings, the config as the
// stable JSON of common/config.h, costs as a JSON array of shortest round-trip decimals. Reading
// a row back gives the same record, and so does a JSON line: export and import lose nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/status.h"
#include "tunefarm/v1/tuner.pb.h"

namespace tunefarm::db {

// Limits on what a record may hold (the tuner's own records are far below them).
inline constexpr int kMaxKnobs = 64;                    // Knobs of a config, and values of a knob.
inline constexpr size_t kMaxErrorMessage = 4096;        // Longer error messages are truncated.
inline constexpr int kMaxCosts = 10000;                 // Timings of one measurement.
inline constexpr int kMaxRemeasureRound = 1000;

// One row of the records table, minus its id and with workload and target as text.
struct RecordRow {
  std::string workload;
  std::string target;
  std::string device_key;
  std::string config;
  int64_t config_index = -1;
  std::string costs;
  double mean_cost_s = 0;
  double gflops = 0;
  int error_code = 0;
  std::string error_msg;
  double build_time_s = 0;
  int64_t started_at_us = 0;
  int64_t finished_at_us = 0;
  std::string job_id;
  std::string agent_id;
  int64_t attempts = 0;
  int64_t remeasure_round = 0;
  std::string built_for;  // Canonical target text; empty when the record does not say.
};

// Validates records and puts them in canonical form. Refuses, naming the field: a workload or
// target that does not parse, an empty or overlong device key, a config without a template or
// with repeated knobs, an unknown error code, non-finite or negative numbers, and an OK record
// without costs. An OK record without a mean gets the mean of its costs.
//
// A batch of records names few workloads and targets many times; the encoder remembers the
// canonical form of those it has seen, which makes encoding a batch several times cheaper.
class RowEncoder {
 public:
  StatusOr<RecordRow> to_row(const v1::Record& record);

 private:
  std::unordered_map<std::string, std::string> workloads_;  // Serialized proto -> canonical text.
  std::unordered_map<std::string, std::string> targets_;
};

// One record, without an encoder's memory.
StatusOr<RecordRow> to_row(const v1::Record& record);

// The record a stored row stands for. A row that no longer parses (the file was edited or is
// damaged) is a kDataLoss error naming the row.
StatusOr<v1::Record> from_row(const RecordRow& row, int64_t row_id);


}  // namespace tunefarm::db
