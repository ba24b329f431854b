// Imports past a limit are refused whole, naming the line and the reason: configs that are not
// points of their template's space, template names that are paths, records too large in any field.
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/wire/wire.h"
#include "compiler/build.h"
#include "db/record_codec.h"
#include "db/record_store.h"
#include "tuner/compiler_task.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

class ImportLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("import-limits-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    store_ = std::move(db::RecordStore::open((dir_ / "history.db").string()).value());
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  static v1::Record good() {
    Workload w = *parse_workload("matmul:M=64,N=64,K=64");
    v1::Record r;
    *r.mutable_workload() = to_proto(w);
    *r.mutable_target() = to_proto(*parse_target("llvm"));
    r.set_device_key("local-cpu");
    *r.mutable_config() = to_proto(*default_config(w, Target{}));
    r.mutable_result()->add_costs(1e-4);
    r.set_gflops(5);
    r.set_job_id("job-1");
    return r;
  }
  // Imports a good record, then `bad` as line 2; the status.
  Status import_after_a_good_one(const std::string& bad) {
    std::stringstream in(record_to_json_line(good()) + "\n" + bad + "\n");
    RecordConfigCheck check;
    return store_->import_jsonl(in, "upload.jsonl", std::ref(check)).status();
  }
  void expect_refused_whole(const std::string& line, const std::string& reason) {
    Status s = import_after_a_good_one(line);
    EXPECT_FALSE(s.ok()) << reason;
    EXPECT_THAT(s.message(), HasSubstr("upload.jsonl line 2"));
    EXPECT_THAT(s.message(), HasSubstr(reason));
    EXPECT_LT(s.message().size(), 1000u) << "the bad line must not be echoed";
    auto page = store_->list_records({}, 10);
    ASSERT_TRUE(page.ok());
    EXPECT_EQ(page->records.size(), 0u) << "nothing may be imported";
  }
  std::filesystem::path dir_;
  std::unique_ptr<db::RecordStore> store_;
};

TEST_F(ImportLimits, AGoodRecordImports) { EXPECT_TRUE(import_after_a_good_one(record_to_json_line(good())).ok()); }

TEST_F(ImportLimits, AConfigOutsideItsTemplatesSpaceIsRefused) {
  v1::Record r = good();
  auto* tile = r.mutable_config()->mutable_knobs(0)->mutable_value()->mutable_ints();
  tile->Clear();
  for (int64_t v : {int64_t{-1}, int64_t{1'000'000'000'000}, int64_t{0}}) tile->add_values(v);
  expect_refused_whole(record_to_json_line(r), "config of template");
}

TEST_F(ImportLimits, ATemplateNameThatIsAPathIsRefused) {
  v1::Record r = good();
  r.mutable_config()->set_template_name("../../../../tmp/evil");
  expect_refused_whole(record_to_json_line(r), "may hold only letters");
}

TEST_F(ImportLimits, TooManyKnobsAreRefusedWithoutParsingThemForMinutes) {
  v1::Record r = good();
  for (int i = 0; i < 200; ++i) {
    auto* k = r.mutable_config()->add_knobs();
    k->set_name("k" + std::to_string(i));
    k->mutable_value()->set_int_value(0);
  }
  expect_refused_whole(record_to_json_line(r), "knobs");
}

TEST_F(ImportLimits, AHugeLineIsRefusedBeforeItIsParsed) {
  v1::Record r = good();
  r.mutable_result()->set_error_msg(std::string(3 << 20, 'x'));
  expect_refused_whole(record_to_json_line(r), "a record may be at most");
}

TEST_F(ImportLimits, ALongTargetIsRefused) {
  v1::Record r = good();
  r.mutable_target()->set_mattr("+avx2" + std::string(600, ','));
  expect_refused_whole(record_to_json_line(r), "target");
}

// The tuner's own records are never refused for a long error message: it is cut to a few KiB.
TEST(RecordLimits, LongErrorMessagesAreTruncatedNotRefused) {
  v1::Record r;
  *r.mutable_workload() = to_proto(*parse_workload("matmul:M=8,N=8,K=8"));
  *r.mutable_target() = to_proto(*parse_target("llvm"));
  r.set_device_key("local-cpu");
  r.mutable_config()->set_template_name("matmul.cpu.packed");
  r.mutable_result()->set_error(v1::RUNTIME_ERROR);
  r.mutable_result()->set_error_msg(std::string(100000, 'y'));
  auto row = db::to_row(r);
  ASSERT_TRUE(row.ok()) << row.status().to_string();
  EXPECT_LE(row->error_msg.size(), db::kMaxErrorMessage + 20);
}

}  // namespace
}  // namespace tunefarm
