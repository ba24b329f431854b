// Readers and writers at once, in one process and across two stores on the same file (as two
// processes would be): every call succeeds, and "database is locked" never reaches a caller.
#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "db/record_store.h"
#include "db/sqlite.h"
#include "db_test_util.h"

namespace tunefarm {
namespace {

using testing::make_record;
using testing::TempDir;

std::vector<v1::Record> batch(int first, int count, const std::string& job) {
  std::vector<v1::Record> records;
  for (int i = first; i < first + count; ++i) {
    records.push_back(make_record({.config = i, .cost = 1e-3 * (1 + i % 17), .job_id = job}));
  }
  return records;
}

TEST(Concurrency, ReadersAndAWriterNeverSeeALockedDatabase) {
  TempDir dir;
  auto store = db::RecordStore::open(dir.file("history.db")).value();
  constexpr int kBatches = 60;
  constexpr int kBatchSize = 50;
  std::atomic<bool> writing{true};
  std::atomic<int> reads{0};
  std::vector<std::string> failures;
  std::mutex failures_mutex;
  auto fail = [&](const Status& status) {
    std::lock_guard lock(failures_mutex);
    failures.push_back(status.to_string());
  };

  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      int64_t last_total = 0;
      while (writing) {
        auto best = store->query_best(testing::workload("matmul:M=64,N=64,K=64"), testing::target("llvm"), "", 5);
        if (!best.ok()) fail(best.status());
        auto page = store->list_records({}, 10);
        if (!page.ok()) {
          fail(page.status());
        } else {
          // Transactions commit whole batches: a reader never sees part of one.
          if (page->total % kBatchSize != 0 || page->total < last_total) fail(internal_error("torn read"));
          last_total = page->total;
        }
        ++reads;
      }
    });
  }
  for (int b = 0; b < kBatches; ++b) {
    auto inserted = store->insert(batch(b * kBatchSize, kBatchSize, "job-1"));
    if (!inserted.ok()) fail(inserted.status());
  }
  writing = false;
  for (auto& t : readers) t.join();
  EXPECT_TRUE(failures.empty()) << failures.front();
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(store->list_records({})->total, kBatches * kBatchSize);
}

TEST(Concurrency, TwoStoresWritingTheSameFileBothSucceed) {
  TempDir dir;
  std::string path = dir.file("history.db");
  auto first = db::RecordStore::open(path).value();
  auto second = db::RecordStore::open(path).value();
  std::vector<std::string> failures;
  std::mutex failures_mutex;
  auto write = [&](db::RecordStore& store, const std::string& job) {
    for (int b = 0; b < 40; ++b) {
      auto inserted = store.insert(batch(b * 25, 25, job));
      if (!inserted.ok()) {
        std::lock_guard lock(failures_mutex);
        failures.push_back(inserted.status().to_string());
      }
    }
  };
  std::thread a([&] { write(*first, "job-a"); });
  std::thread b([&] { write(*second, "job-b"); });
  a.join();
  b.join();
  EXPECT_TRUE(failures.empty()) << failures.front();
  EXPECT_EQ(first->list_records({})->total, 2000);
  EXPECT_EQ(second->count_measured_configs("job-a").value(), 1000);
}

TEST(Concurrency, ALockHeldTooLongIsAClearErrorNotALockedDatabase) {
  TempDir dir;
  std::string path = dir.file("history.db");
  auto store = db::RecordStore::open(path, {.busy_budget = std::chrono::milliseconds(400)}).value();
  auto other = db::Connection::open(path, db::Connection::Mode::kReadWrite, std::chrono::milliseconds(100)).value();
  ASSERT_TRUE(other->exec("BEGIN EXCLUSIVE").ok());
  auto inserted = store->insert(batch(0, 3, "job-1"));
  ASSERT_FALSE(inserted.ok());
  EXPECT_EQ(inserted.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(inserted.status().message().find("database is locked"), std::string::npos);
  EXPECT_NE(inserted.status().message().find(path), std::string::npos) << inserted.status().message();
  ASSERT_TRUE(other->exec("COMMIT").ok());
  // Once the other process lets go, the same store works again.
  EXPECT_EQ(store->insert(batch(0, 3, "job-1")).value(), 3);
}

}  // namespace
}  // namespace tunefarm
