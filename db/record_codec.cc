#include "db/record_codec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/config.h"
#include "common/target.h"
#include "common/wire/wire.h"
#include "common/workload.h"

namespace tunefarm::db {
namespace {

constexpr size_t kMaxKeyLength = 256;
// Bounds an encoder's memory when every record names a different workload.
constexpr size_t kMaxRemembered = 4096;

Status check_number(double value, std::string_view field) {
  if (!std::isfinite(value) || value < 0) {
    return invalid_argument(fmt::format("{} is {}; it must be a finite number >= 0", field, value));
  }
  return Status();
}

Status check_key(std::string_view value, std::string_view field, bool required) {
  if (required && value.empty()) return invalid_argument(fmt::format("{} is empty", field));
  if (value.size() > kMaxKeyLength) {
    return invalid_argument(fmt::format("{} is {} bytes long; at most {} are allowed", field, value.size(),
                                        kMaxKeyLength));
  }
  for (char c : value) {
    if (static_cast<unsigned char>(c) < 0x20) {
      return invalid_argument(fmt::format("{} '{}' holds a control character", field, value));
    }
  }
  return Status();
}

std::string costs_to_json(const google::protobuf::RepeatedField<double>& costs) {
  // fmt writes the shortest decimal that reads back as the same double, except that -0 reads back
  // as the integer 0: a zero is written as 0 whatever its sign.
  std::vector<double> values;
  values.reserve(costs.size());
  for (double c : costs) values.push_back(c == 0 ? 0.0 : c);
  return fmt::format("[{}]", fmt::join(values, ","));
}

bool is_name(std::string_view s) {
  return !s.empty() && s.size() <= kMaxKeyLength &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; });
}

StatusOr<Config> checked_config(const v1::Config& proto) {
  if (proto.template_name().empty()) return invalid_argument("config has no template name");
  if (!is_name(proto.template_name()))
    return invalid_argument(fmt::format("config template name '{}' may hold only letters, digits, '_' and '.'",
                                        proto.template_name().substr(0, 64)));
  if (proto.knobs_size() > kMaxKnobs)
    return invalid_argument(fmt::format("config has {} knobs; templates have at most {}", proto.knobs_size(), kMaxKnobs));
  std::set<std::string_view> names;
  for (const auto& knob : proto.knobs()) {
    if (!is_name(knob.name())) return invalid_argument("config has a knob whose name is empty or not a plain name");
    if (knob.value().ints().values_size() > kMaxKnobs)
      return invalid_argument(fmt::format("knob '{}' has {} values; at most {} are allowed", knob.name(),
                                          knob.value().ints().values_size(), kMaxKnobs));
    if (knob.value().str_value().size() > kMaxKeyLength)
      return invalid_argument(fmt::format("knob '{}' has a value of {} bytes", knob.name(),
                                          knob.value().str_value().size()));
    if (!names.insert(knob.name()).second) return invalid_argument(fmt::format("config repeats knob '{}'", knob.name()));
  }
  return from_proto(proto);
}

// The canonical text of a workload or target message, parsed once per distinct message.
template <typename Message>
StatusOr<std::string> canonical_text(const Message& message, std::unordered_map<std::string, std::string>& known,
                                     std::string_view field) {
  std::string key = message.SerializeAsString();
  if (auto it = known.find(key); it != known.end()) return it->second;
  auto parsed = from_proto(message);
  if (!parsed.ok()) return parsed.status().with_context(field);
  if (known.size() >= kMaxRemembered) known.clear();
  return known.emplace(std::move(key), parsed->to_string()).first->second;
}

Status row_data_loss(int64_t row_id, std::string_view what, const Status& cause) {
  return Status(StatusCode::kDataLoss, fmt::format("record {} in the history holds a {} that does not parse ({}); "
                                                   "the database was changed outside tunefarm or is damaged",
                                                   row_id, what, cause.message()));
}

}  // namespace

StatusOr<RecordRow> to_row(const v1::Record& record) { return RowEncoder().to_row(record); }

StatusOr<RecordRow> RowEncoder::to_row(const v1::Record& record) {
  RecordRow row;
  if (!record.has_workload()) return invalid_argument("record has no workload");
  TF_ASSIGN_OR_RETURN(row.workload, canonical_text(record.workload(), workloads_, "record workload"));
  if (!record.has_target()) return invalid_argument("record has no target");
  TF_ASSIGN_OR_RETURN(row.target, canonical_text(record.target(), targets_, "record target"));

  TF_RETURN_IF_ERROR(check_key(record.device_key(), "record device_key", true));
  row.device_key = record.device_key();

  if (!record.has_config()) return invalid_argument("record has no config");
  TF_ASSIGN_OR_RETURN(Config config, checked_config(record.config()));
  row.config = config.to_json();
  row.config_index = record.config().index();

  const v1::MeasureResult& result = record.result();
  if (!v1::ErrorCode_IsValid(result.error())) {
    return invalid_argument(fmt::format("record error code {} is not a known ErrorCode", static_cast<int>(result.error())));
  }
  row.error_code = result.error();
  // Kernels and workers write these; the first few KiB say what happened.
  row.error_msg = result.error_msg().size() > kMaxErrorMessage
                      ? result.error_msg().substr(0, kMaxErrorMessage) + " [truncated]"
                      : result.error_msg();
  if (result.costs_size() > kMaxCosts)
    return invalid_argument(fmt::format("record has {} costs; at most {} are allowed", result.costs_size(), kMaxCosts));
  for (double cost : result.costs()) TF_RETURN_IF_ERROR(check_number(cost, "record cost"));
  row.costs = costs_to_json(result.costs());

  row.mean_cost_s = record.mean_cost_s();
  TF_RETURN_IF_ERROR(check_number(row.mean_cost_s, "record mean_cost_s"));
  if (result.error() == v1::OK) {
    if (result.costs().empty()) return invalid_argument("record is OK but has no costs");
    if (row.mean_cost_s == 0) {
      double sum = 0;
      for (double cost : result.costs()) sum += cost;
      row.mean_cost_s = sum / result.costs_size();
    }
    if (row.mean_cost_s <= 0) return invalid_argument("record is OK but its mean cost is 0");
  }
  row.gflops = record.gflops();
  TF_RETURN_IF_ERROR(check_number(row.gflops, "record gflops"));
  row.build_time_s = record.build_time_s();
  TF_RETURN_IF_ERROR(check_number(row.build_time_s, "record build_time_s"));

  row.started_at_us = result.started_at_us();
  row.finished_at_us = result.finished_at_us();
  if (row.started_at_us < 0 || row.finished_at_us < 0) return invalid_argument("record timestamps are negative");
  if (result.attempts() < 0) return invalid_argument("record attempts is negative");
  row.attempts = result.attempts();
  if (record.remeasure_round() < 0 || record.remeasure_round() > kMaxRemeasureRound)
    return invalid_argument(fmt::format("record remeasure_round {} is outside 0..{}", record.remeasure_round(),
                                        kMaxRemeasureRound));
  row.remeasure_round = record.remeasure_round();
  if (record.has_built_for()) {
    TF_ASSIGN_OR_RETURN(row.built_for, canonical_text(record.built_for(), targets_, "record built_for"));
  }
  TF_RETURN_IF_ERROR(check_key(record.job_id(), "record job_id", false));
  row.job_id = record.job_id();
  TF_RETURN_IF_ERROR(check_key(result.agent_id(), "record agent_id", false));
  row.agent_id = result.agent_id();
  return row;
}

StatusOr<v1::Record> from_row(const RecordRow& row, int64_t row_id) {
  v1::Record record;
  auto workload = parse_workload(row.workload);
  if (!workload.ok()) return row_data_loss(row_id, "workload", workload.status());
  *record.mutable_workload() = to_proto(*workload);
  auto target = parse_target(row.target);
  if (!target.ok()) return row_data_loss(row_id, "target", target.status());
  *record.mutable_target() = to_proto(*target);
  record.set_device_key(row.device_key);
  auto config = parse_config_json(row.config);
  if (!config.ok()) return row_data_loss(row_id, "config", config.status());
  *record.mutable_config() = to_proto(*config);
  record.mutable_config()->set_index(row.config_index);

  v1::MeasureResult* result = record.mutable_result();
  auto costs = nlohmann::json::parse(row.costs, nullptr, false);
  if (!costs.is_array()) return row_data_loss(row_id, "cost list", invalid_argument("not a JSON array"));
  for (const auto& cost : costs) {
    if (!cost.is_number()) return row_data_loss(row_id, "cost list", invalid_argument("not a list of numbers"));
    result->add_costs(cost.get<double>());
  }
  if (!v1::ErrorCode_IsValid(row.error_code)) {
    return row_data_loss(row_id, "error code", invalid_argument(fmt::format("{} is unknown", row.error_code)));
  }
  result->set_error(static_cast<v1::ErrorCode>(row.error_code));
  result->set_error_msg(row.error_msg);
  result->set_started_at_us(row.started_at_us);
  result->set_finished_at_us(row.finished_at_us);
  result->set_agent_id(row.agent_id);
  result->set_attempts(static_cast<int32_t>(row.attempts));
  record.set_mean_cost_s(row.mean_cost_s);
  record.set_gflops(row.gflops);
  record.set_build_time_s(row.build_time_s);
  record.set_job_id(row.job_id);
  record.set_remeasure_round(static_cast<int32_t>(row.remeasure_round));
  if (!row.built_for.empty()) {
    auto built_for = parse_target(row.built_for);
    if (!built_for.ok()) return row_data_loss(row_id, "built_for target", built_for.status());
    *record.mutable_built_for() = to_proto(*built_for);
  }
  return record;
}

}  // namespace tunefarm::db
