#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "db/record_store.h"
#include "history_test.h"

namespace tunefarm {
namespace {

using testing::make_record;
using testing::same;

const std::vector<std::string> kWorkloads = {"matmul:M=64,N=64,K=64", "matmul:M=128,N=128,K=128",
                                             "dense:M=1,N=1000,K=2048"};
const std::vector<std::string> kTargets = {"llvm", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"};
const std::vector<std::string> kDevices = {"x86-a", "x86-b"};

// A small history over several workloads, targets and devices, with failures mixed in.
std::vector<v1::Record> history() {
  std::vector<v1::Record> records;
  int n = 0;
  for (const auto& w : kWorkloads)
    for (const auto& t : kTargets)
      for (const auto& d : kDevices)
        for (int c = 0; c < 8; ++c, ++n) {
          auto error = n % 5 == 0 ? v1::RUN_TIMEOUT : v1::OK;
          records.push_back(make_record({.workload = w, .target = t, .device_key = d, .config = c,
                                         .cost = 1e-3 * (1 + (n * 7919) % 13) / 3.0, .error = error,
                                         .job_id = "job-" + std::to_string(n % 3)}));
        }
  return records;
}

std::string export_all(db::RecordStore& store, const db::RecordFilter& filter = {}) {
  std::ostringstream out;
  Status status = store.export_jsonl(filter, out);
  EXPECT_TRUE(status.ok()) << status.to_string();
  return out.str();
}

class JsonLinesTest : public testing::HistoryTest {
 protected:
  void SetUp() override {
    HistoryTest::SetUp();
    if (IsSkipped()) return;
    source_ = db::RecordStore::open(location("source")).value();
    destination_ = db::RecordStore::open(location("destination")).value();
    ASSERT_EQ(source_->insert(history()).value(), static_cast<int64_t>(history().size()));
  }
  std::unique_ptr<db::RecordStore> source_;
  std::unique_ptr<db::RecordStore> destination_;
};

TUNEFARM_ON_BOTH_BACKENDS(JsonLinesTest);

TEST_P(JsonLinesTest, ExportThenImportGivesIdenticalRecordsAndBestAnswers) {
  std::string exported = export_all(*source_);
  EXPECT_EQ(std::count(exported.begin(), exported.end(), '\n'), static_cast<long>(history().size()));
  std::istringstream in(exported);
  auto stats = destination_->import_jsonl(in, "export.jsonl");
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_EQ(stats->imported, static_cast<int64_t>(history().size()));
  EXPECT_EQ(stats->skipped, 0);

  EXPECT_EQ(export_all(*destination_), exported);
  auto from = source_->list_records({}, 100000)->records;
  auto to = destination_->list_records({}, 100000)->records;
  ASSERT_EQ(from.size(), to.size());
  for (size_t i = 0; i < from.size(); ++i) EXPECT_TRUE(same(from[i], to[i])) << i;

  for (const auto& w : kWorkloads)
    for (const auto& t : kTargets)
      for (const std::string& d : {std::string(), kDevices[0], kDevices[1]}) {
        auto a = source_->query_best(testing::workload(w), testing::target(t), d, 3).value();
        auto b = destination_->query_best(testing::workload(w), testing::target(t), d, 3).value();
        ASSERT_EQ(a.size(), 3u);
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same(a[i], b[i])) << w << " " << t << " " << d;
      }
}

TEST_P(JsonLinesTest, ImportingTwiceSkipsWhatIsThere) {
  std::istringstream first(export_all(*source_));
  ASSERT_TRUE(destination_->import_jsonl(first, "a").ok());
  std::istringstream second(export_all(*source_));
  auto stats = destination_->import_jsonl(second, "a");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->imported, 0);
  EXPECT_EQ(stats->skipped, static_cast<int64_t>(history().size()));
  EXPECT_EQ(destination_->list_records({})->total, static_cast<int64_t>(history().size()));
}

TEST_P(JsonLinesTest, FilteredExportHoldsOnlyMatchingRecords) {
  db::RecordFilter filter{.workload = testing::workload(kWorkloads[2]), .device_key = "x86-b"};
  std::istringstream in(export_all(*source_, filter));
  auto stats = destination_->import_jsonl(in, "part");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->imported, 16);
  auto page = destination_->list_records({});
  ASSERT_TRUE(page.ok());
  for (const auto& r : page->records) {
    EXPECT_EQ(r.workload().op(), "dense");
    EXPECT_EQ(r.device_key(), "x86-b");
  }
}

TEST_P(JsonLinesTest, ImportsFromAFileIgnoringBlankLines) {
  std::string path = dir_.file("records.jsonl");
  std::string exported = export_all(*source_);
  {
    std::ofstream out(path);
    out << "\n" << exported.substr(0, exported.find('\n') + 1) << "   \n\n" << exported.substr(exported.find('\n') + 1);
  }
  std::ifstream in(path);
  auto stats = destination_->import_jsonl(in, path);
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_EQ(stats->imported, static_cast<int64_t>(history().size()));
}

TEST_P(JsonLinesTest, ExportStopsAtTheSinksError) {
  int seen = 0;
  Status status = source_->export_records({}, [&](const v1::Record&) -> Status {
    return ++seen == 3 ? unavailable("client went away") : Status();
  });
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(seen, 3);
}

}  // namespace
}  // namespace tunefarm
