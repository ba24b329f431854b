// Helpers shared by the db tests: a temporary directory that cleans up after itself, and records
// built from short descriptions.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <google/protobuf/util/message_differencer.h>

#include "common/config.h"
#include "common/target.h"
#include "common/wire/wire.h"
#include "common/workload.h"
#include "tunefarm/v1/tuner.pb.h"

namespace tunefarm::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tunefarm-db-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Test inputs are meant to be valid: a typo stops the test binary with the parser's message.
template <typename T>
T valid(StatusOr<T> parsed, const std::string& text) {
  if (!parsed.ok()) {
    std::fprintf(stderr, "test input '%s' does not parse: %s\n", text.c_str(), parsed.status().to_string().c_str());
    std::abort();
  }
  return std::move(parsed).value();
}
inline Workload workload(const std::string& text) { return valid(parse_workload(text), text); }
inline Target target(const std::string& text) { return valid(parse_target(text), text); }

// A matmul config whose knobs are derived from `variant`, so that different variants differ.
inline Config config(int variant) {
  Config c;
  c.template_name = "matmul.cpu.blocked";
  c.knobs.emplace_back("tile_m", std::vector<int64_t>{-1, 1 + variant % 8, 1 + variant / 8});
  c.knobs.emplace_back("tile_n", std::vector<int64_t>{-1, 1 + variant / 8 % 8, 16});
  c.knobs.emplace_back("unroll", std::string(variant % 2 ? "on" : "off"));
  c.knobs.emplace_back("order", int64_t{variant % 3});
  return c;
}

struct RecordSpec {
  std::string workload = "matmul:M=64,N=64,K=64";
  std::string target = "llvm";
  std::string device_key = "local-cpu";
  int config = 0;
  double cost = 1e-3;                 // Seconds; the record is OK when error is OK.
  v1::ErrorCode error = v1::OK;
  std::string job_id = "job-1";
  int64_t started_at_us = 1'700'000'000'000'000;
  std::string agent_id = "agent-a";
};

inline v1::Record make_record(const RecordSpec& spec) {
  v1::Record record;
  *record.mutable_workload() = to_proto(workload(spec.workload));
  *record.mutable_target() = to_proto(target(spec.target));
  record.set_device_key(spec.device_key);
  *record.mutable_config() = to_proto(config(spec.config));
  record.mutable_config()->set_index(spec.config);
  auto* result = record.mutable_result();
  result->set_error(spec.error);
  if (spec.error == v1::OK) {
    result->add_costs(spec.cost * 0.99);
    result->add_costs(spec.cost);
    result->add_costs(spec.cost * 1.01);
    record.set_mean_cost_s(spec.cost);
    record.set_gflops(2.0 * 64 * 64 * 64 / spec.cost / 1e9);
  } else {
    result->set_error_msg("it went wrong");
  }
  result->set_started_at_us(spec.started_at_us);
  result->set_finished_at_us(spec.started_at_us + 1500);
  result->set_agent_id(spec.agent_id);
  result->set_attempts(1);
  record.set_build_time_s(0.012);
  record.set_job_id(spec.job_id);
  return record;
}

inline bool same(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

}  // namespace tunefarm::testing
