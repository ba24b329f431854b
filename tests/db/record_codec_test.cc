#include "db/record_codec.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "common/wire/wire.h"
#include "db_test_util.h"

namespace tunefarm {
namespace {

using testing::make_record;
using testing::RecordSpec;
using testing::same;

v1::Record round_trip(const v1::Record& record) {
  auto row = db::to_row(record);
  EXPECT_TRUE(row.ok()) << row.status().to_string();
  return db::from_row(*row, 1).value();
}

TEST(RecordCodec, RowRoundTripLosesNothing) {
  v1::Record record = make_record({.config = 5, .cost = 1.0 / 3.0});
  record.mutable_result()->set_costs(1, 0.1 + 0.2);  // Not exactly representable in few digits.
  record.set_gflops(123.456789012345678);
  v1::Record back = round_trip(record);
  EXPECT_TRUE(same(back, record)) << back.DebugString() << "\nvs\n" << record.DebugString();
  EXPECT_EQ(back.result().costs(1), 0.1 + 0.2);
}

TEST(RecordCodec, OtherOperatorsTargetsAndEmptyFieldsRoundTrip) {
  v1::Record record = make_record({.workload = "batch_matmul:B=12,M=128,N=128,K=64",
                                   .target = "cuda -arch=sm_90", .device_key = "h100", .job_id = "",
                                   .agent_id = ""});
  record.mutable_config()->clear_knobs();
  v1::Record back = round_trip(record);
  EXPECT_TRUE(same(back, record)) << back.DebugString();
  EXPECT_EQ(back.target().arch(), "sm_90");
}

// Negative zero passes the ">= 0" check; its text "-0" reads back as the integer 0, so the
// canonical row must hold 0 from the start (found by record_fuzz).
TEST(RecordCodec, NegativeZeroCostHasOneCanonicalForm) {
  v1::Record record = make_record({.error = v1::RUNTIME_ERROR});
  record.mutable_result()->add_costs(-0.0);
  auto row = db::to_row(record);
  ASSERT_TRUE(row.ok()) << row.status().to_string();
  auto again = db::to_row(db::from_row(*row, 1).value());
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->costs, row->costs);
}

TEST(RecordCodec, FailedRecordRoundTrips) {
  v1::Record record = make_record({.error = v1::RUNTIME_ERROR});
  EXPECT_TRUE(same(round_trip(record), record));
}

TEST(RecordCodec, StoresCanonicalForms) {
  v1::Record record = make_record({});
  record.mutable_workload()->set_dtype(v1::DTYPE_UNSPECIFIED);  // float32 by default
  auto row = db::to_row(record).value();
  EXPECT_EQ(row.workload, "matmul:M=64,N=64,K=64");
  EXPECT_EQ(row.target, "llvm");
  EXPECT_EQ(row.config, testing::config(0).to_json());
  EXPECT_EQ(row.costs, "[0.00099,0.001,0.00101]");
}

TEST(RecordCodec, OkRecordWithoutMeanGetsTheMeanOfItsCosts) {
  v1::Record record = make_record({});
  record.mutable_result()->clear_costs();
  record.mutable_result()->add_costs(1.0);
  record.mutable_result()->add_costs(3.0);
  record.set_mean_cost_s(0);
  EXPECT_EQ(db::to_row(record).value().mean_cost_s, 2.0);
}

struct Refusal {
  std::string name;
  std::function<void(v1::Record&)> spoil;
  std::string says;
};

TEST(RecordCodec, RefusesInvalidRecordsNamingTheField) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<Refusal> cases = {
      {"no workload", [](v1::Record& r) { r.clear_workload(); }, "no workload"},
      {"bad workload", [](v1::Record& r) { r.mutable_workload()->set_op("matmool"); }, "record workload"},
      {"negative shape", [](v1::Record& r) { r.mutable_workload()->mutable_params(0)->set_value(-4); },
       "record workload"},
      {"bad target", [](v1::Record& r) { r.mutable_target()->set_kind("fpga"); }, "record target"},
      {"no device", [](v1::Record& r) { r.set_device_key(""); }, "device_key is empty"},
      {"control char", [](v1::Record& r) { r.set_device_key("a\nb"); }, "control character"},
      {"long job id", [](v1::Record& r) { r.set_job_id(std::string(300, 'j')); }, "job_id is 300 bytes"},
      {"no template", [](v1::Record& r) { r.mutable_config()->set_template_name(""); }, "no template"},
      {"repeated knob",
       [](v1::Record& r) { *r.mutable_config()->add_knobs() = r.config().knobs(0); }, "repeats knob 'tile_m'"},
      {"unknown error", [](v1::Record& r) { r.mutable_result()->set_error(static_cast<v1::ErrorCode>(77)); },
       "error code 77"},
      {"ok without costs", [](v1::Record& r) { r.mutable_result()->clear_costs(); }, "no costs"},
      {"nan cost", [nan](v1::Record& r) { r.mutable_result()->set_costs(0, nan); }, "record cost is nan"},
      {"negative gflops", [](v1::Record& r) { r.set_gflops(-1); }, "gflops"},
      {"infinite mean", [](v1::Record& r) { r.set_mean_cost_s(INFINITY); }, "mean_cost_s"},
      {"negative attempts", [](v1::Record& r) { r.mutable_result()->set_attempts(-1); }, "attempts"},
  };
  for (const auto& c : cases) {
    v1::Record record = make_record({});
    c.spoil(record);
    auto row = db::to_row(record);
    ASSERT_FALSE(row.ok()) << c.name;
    EXPECT_EQ(row.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(row.status().message().find(c.says), std::string::npos) << c.name << ": " << row.status().message();
  }
}

TEST(RecordCodec, EncoderRemembersOnlyWhatParsed) {
  db::RowEncoder encoder;
  v1::Record dense = make_record({.workload = "dense:M=1,N=1000,K=2048"});
  v1::Record bad = make_record({});
  bad.mutable_workload()->mutable_params(0)->set_value(0);
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(encoder.to_row(make_record({})).value().workload, "matmul:M=64,N=64,K=64");
    EXPECT_EQ(encoder.to_row(dense).value().workload, "dense:M=1,N=1000,K=2048");
    EXPECT_EQ(encoder.to_row(bad).status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(RecordCodec, JsonLineRoundTripsWithProtoFieldNames) {
  v1::Record record = make_record({.config = 3, .cost = 2.0 / 7.0});
  std::string line = record_to_json_line(record);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NE(line.find("\"device_key\":\"local-cpu\""), std::string::npos) << line;
  auto back = record_from_json_line(line);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_TRUE(same(*back, record));
}

TEST(RecordCodec, JsonLineRefusesGarbageAndUnknownFields) {
  EXPECT_FALSE(record_from_json_line("not json").ok());
  EXPECT_FALSE(record_from_json_line("{\"device_key\": 3").ok());
  auto unknown = record_from_json_line("{\"devicekey\":\"x\"}");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("devicekey"), std::string::npos) << unknown.status().message();
}

TEST(RecordCodec, DamagedRowIsDataLossNamingTheRow) {
  auto row = db::to_row(make_record({})).value();
  row.config = "{\"template\":";
  auto record = db::from_row(row, 4711);
  ASSERT_FALSE(record.ok());
  EXPECT_EQ(record.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(record.status().message().find("record 4711"), std::string::npos) << record.status().message();
  row = db::to_row(make_record({})).value();
  row.costs = "[1, \"x\"]";
  EXPECT_EQ(db::from_row(row, 1).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace tunefarm
