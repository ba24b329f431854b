#include "db/writer.h"

#include <atomic>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "db_test_util.h"

namespace tunefarm {
namespace {

using db::Connection;
using db::Writer;
using testing::TempDir;

constexpr std::chrono::milliseconds kBudget{5000};

std::unique_ptr<Connection> connect(const std::string& path) {
  auto connection = Connection::open(path, Connection::Mode::kReadWrite, std::chrono::milliseconds(1000)).value();
  EXPECT_TRUE(connection->exec("PRAGMA journal_mode = WAL; CREATE TABLE IF NOT EXISTS t (x INTEGER)").ok());
  return connection;
}

Writer::Operation insert_value(int64_t x) {
  return [x](Connection& connection) -> StatusOr<int64_t> {
    TF_RETURN_IF_ERROR(connection.exec(fmt::format("INSERT INTO t VALUES ({})", x)));
    return connection.changes();
  };
}

int64_t count(const std::string& path, const std::string& where = "") {
  return connect(path)->query_int("SELECT count(*) FROM t " + where).value();
}

TEST(Writer, FailingOperationIsRolledBackAlone) {
  TempDir dir;
  std::string path = dir.file("w.db");
  Writer writer(connect(path), kBudget);
  auto first = writer.submit(insert_value(1));
  auto failing = writer.submit([](Connection& connection) -> StatusOr<int64_t> {
    TF_RETURN_IF_ERROR(connection.exec("INSERT INTO t VALUES (2)"));
    return invalid_argument("refused after writing");
  });
  auto third = writer.submit(insert_value(3));
  EXPECT_EQ(first.get().value(), 1);
  EXPECT_EQ(failing.get().status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(third.get().value(), 1);
  EXPECT_EQ(count(path), 2);
  EXPECT_EQ(count(path, "WHERE x = 2"), 0);
}

// A full disk is an outage: detached writes (measurements) are held and written once the disk
// takes them again; a caller who waits gets the error instead of hanging.
TEST(Writer, AFullDiskHoldsDetachedWritesUntilItTakesThemAgain) {
  TempDir dir;
  std::string path = dir.file("w.db");
  Writer writer(connect(path), kBudget);
  std::atomic<int> refusals{3};
  writer.submit_detached([&](Connection& connection) -> StatusOr<int64_t> {
    if (refusals.load() > 0) {
      refusals--;
      return resource_exhausted("disk full");
    }
    TF_RETURN_IF_ERROR(connection.exec("INSERT INTO t VALUES (1)"));
    return connection.changes();
  });
  for (int i = 0; i < 100 && writer.outage().ok(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  Status outage = writer.outage();
  EXPECT_EQ(outage.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(outage.message().find("cannot be written since"), std::string::npos) << outage.message();
  EXPECT_NE(outage.message().find("disk full"), std::string::npos) << outage.message();
  // Waiting callers get one try, then the error (the held write fails again in the same batch).
  auto waited = writer.submit(insert_value(2));
  StatusOr<int64_t> answer = waited.get();
  if (!answer.ok()) {
    EXPECT_EQ(answer.status().code(), StatusCode::kResourceExhausted);
  }
  EXPECT_TRUE(writer.flush().ok());
  EXPECT_TRUE(writer.outage().ok());
  EXPECT_EQ(count(path, "WHERE x = 1"), 1);
}

TEST(Writer, FlushReportsDetachedErrorsOnce) {
  TempDir dir;
  std::string path = dir.file("w.db");
  Writer writer(connect(path), kBudget);
  writer.submit_detached(insert_value(1));
  writer.submit_detached([](Connection&) -> StatusOr<int64_t> { return invalid_argument("bad batch"); });
  Status first = writer.flush();
  EXPECT_EQ(first.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(first.message(), "bad batch");
  EXPECT_TRUE(writer.flush().ok());
  EXPECT_EQ(count(path), 1);
}

// Operations queued while the writer is busy share one transaction, up to the batch weight: a
// failing disk (kDataLoss) aborts exactly the operations of its transaction.
TEST(Writer, QueuedOperationsShareTransactionsUpToTheBatchWeight) {
  TempDir dir;
  std::string path = dir.file("w.db");
  Writer writer(connect(path), kBudget, /*max_batch_weight=*/4);
  std::promise<void> started;
  std::promise<void> release;
  auto released = release.get_future().share();
  writer.submit_detached([&started, released](Connection&) -> StatusOr<int64_t> {
    started.set_value();
    released.wait();
    return 0;
  });
  started.get_future().wait();
  std::vector<std::future<StatusOr<int64_t>>> results;
  for (int i = 0; i < 8; ++i) {
    if (i == 1) {
      results.push_back(writer.submit([](Connection&) -> StatusOr<int64_t> {
        return Status(StatusCode::kDataLoss, "disk failed");
      }));
    } else {
      results.push_back(writer.submit(insert_value(i)));
    }
  }
  release.set_value();
  for (int i = 0; i < 8; ++i) {
    auto result = results[i].get();
    if (i < 4) {
      EXPECT_EQ(result.status().code(), StatusCode::kDataLoss) << i;
    } else {
      EXPECT_TRUE(result.ok()) << i;
    }
  }
  EXPECT_EQ(count(path), 4);
  EXPECT_EQ(count(path, "WHERE x < 4"), 0);
}

TEST(Writer, DestructionCommitsWhatIsQueued) {
  TempDir dir;
  std::string path = dir.file("w.db");
  {
    Writer writer(connect(path), kBudget);
    for (int i = 0; i < 50; ++i) writer.submit_detached(insert_value(i));
  }
  EXPECT_EQ(count(path), 50);
}

TEST(Writer, WaitsOutAnotherProcessHoldingTheLock) {
  TempDir dir;
  std::string path = dir.file("w.db");
  Writer writer(connect(path), kBudget);
  auto other = connect(path);
  ASSERT_TRUE(other->exec("BEGIN IMMEDIATE").ok());
  auto result = writer.submit(insert_value(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(other->exec("COMMIT").ok());
  auto inserted = result.get();
  ASSERT_TRUE(inserted.ok()) << inserted.status().to_string();
  EXPECT_EQ(count(path), 1);
}

TEST(Writer, GivesUpWithAClearErrorWhenTheLockIsNeverReleased) {
  TempDir dir;
  std::string path = dir.file("w.db");
  Writer writer(connect(path), std::chrono::milliseconds(300));
  auto other = connect(path);
  ASSERT_TRUE(other->exec("BEGIN IMMEDIATE").ok());
  auto result = writer.submit(insert_value(1)).get();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(result.status().message().find("locked by another process"), std::string::npos);
  EXPECT_EQ(result.status().message().find("database is locked"), std::string::npos);
  ASSERT_TRUE(other->exec("ROLLBACK").ok());
}

}  // namespace
}  // namespace tunefarm
