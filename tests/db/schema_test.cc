#include "db/schema.h"

#include <gtest/gtest.h>

#include "db/queries.h"
#include "db/record_store.h"
#include "db/sqlite.h"
#include "db_test_util.h"

namespace tunefarm {
namespace {

using db::Connection;
using testing::TempDir;

std::unique_ptr<Connection> raw(const std::string& path) {
  return Connection::open(path, Connection::Mode::kReadWrite, std::chrono::milliseconds(1000)).value();
}

int64_t user_version(const std::string& path) { return raw(path)->query_int("PRAGMA user_version").value(); }

TEST(Schema, NewDatabaseIsAtCurrentVersionInWalMode) {
  TempDir dir;
  std::string path = dir.file("history.db");
  ASSERT_TRUE(db::RecordStore::open(path).ok());
  EXPECT_EQ(user_version(path), db::current_schema_version());
  EXPECT_EQ(db::current_schema_version(), static_cast<int>(db::migrations().size()));
  auto connection = raw(path);
  auto mode = connection->prepare("PRAGMA journal_mode").value();
  ASSERT_TRUE(mode.step().value());
  EXPECT_EQ(mode.column_text(0), "wal");
}

TEST(Schema, OlderDatabaseIsMigratedAndKeepsItsRecords) {
  TempDir dir;
  std::string path = dir.file("history.db");
  {
    // A history written by the first schema version, before the query indexes existed.
    auto connection = raw(path);
    ASSERT_TRUE(db::migrate(*connection, db::migrations().first(1)).ok());
    ASSERT_TRUE(connection
                    ->exec("INSERT INTO workloads (id, text) VALUES (1, 'matmul:M=64,N=64,K=64');"
                           "INSERT INTO targets (id, text) VALUES (1, 'llvm');"
                           "INSERT INTO records (workload_id, target_id, device_key, config, config_index, costs, "
                           "mean_cost_s, gflops, error_code, error_msg, build_time_s, started_at_us, "
                           "finished_at_us, job_id, agent_id, attempts) VALUES (1, 1, 'local-cpu', "
                           "'{\"template\":\"matmul.cpu.blocked\",\"knobs\":{\"order\":1}}', 7, '[0.002,0.002]', "
                           "0.002, 0.26, 0, '', 0.01, 5, 6, 'job-old', 'agent-a', 1)")
                    .ok());
  }
  ASSERT_EQ(user_version(path), 1);
  auto store = db::RecordStore::open(path);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_EQ(user_version(path), db::current_schema_version());
  auto best = (*store)->query_best(testing::workload("matmul:M=64,N=64,K=64"), testing::target("llvm"));
  ASSERT_TRUE(best.ok()) << best.status().to_string();
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].job_id(), "job-old");
  EXPECT_EQ((*best)[0].config().index(), 7);
}

TEST(Schema, NewerDatabaseIsRefusedAndLeftAsItIs) {
  TempDir dir;
  std::string path = dir.file("history.db");
  ASSERT_TRUE(db::RecordStore::open(path).ok());
  ASSERT_TRUE(raw(path)->exec("PRAGMA user_version = 99").ok());
  auto store = db::RecordStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("schema version 99"), std::string::npos) << store.status().message();
  EXPECT_NE(store.status().message().find("newer tunefarm"), std::string::npos);
  EXPECT_EQ(user_version(path), 99);
}

TEST(Schema, DatabaseOfAnotherProgramIsLeftAlone) {
  TempDir dir;
  std::string path = dir.file("other.db");
  ASSERT_TRUE(raw(path)->exec("CREATE TABLE photos (id INTEGER PRIMARY KEY)").ok());
  auto store = db::RecordStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("another program"), std::string::npos) << store.status().message();
  EXPECT_EQ(raw(path)->query_int("SELECT count(*) FROM sqlite_master WHERE name = 'records'").value(), 0);
}

TEST(Schema, MigrationsRunInOrderAndOnlyOnce) {
  TempDir dir;
  std::string path = dir.file("steps.db");
  const db::Migration steps[] = {
      {1, "table", "CREATE TABLE t (x INTEGER)"},
      {2, "row", "INSERT INTO t VALUES (42)"},
  };
  auto connection = raw(path);
  ASSERT_TRUE(db::migrate(*connection, std::span(steps).first(1)).ok());
  EXPECT_EQ(connection->query_int("PRAGMA user_version").value(), 1);
  ASSERT_TRUE(db::migrate(*connection, steps).ok());
  ASSERT_TRUE(db::migrate(*connection, steps).ok());
  EXPECT_EQ(connection->query_int("PRAGMA user_version").value(), 2);
  EXPECT_EQ(connection->query_int("SELECT count(*) FROM t").value(), 1);
}

TEST(Schema, FailedMigrationChangesNothing) {
  TempDir dir;
  std::string path = dir.file("steps.db");
  const db::Migration steps[] = {
      {1, "table", "CREATE TABLE t (x INTEGER)"},
      {2, "broken", "INSERT INTO no_such_table VALUES (1)"},
  };
  auto connection = raw(path);
  Status status = db::migrate(*connection, steps);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("schema version 2 (broken)"), std::string::npos) << status.message();
  EXPECT_EQ(connection->query_int("PRAGMA user_version").value(), 0);
  EXPECT_EQ(connection->query_int("SELECT count(*) FROM sqlite_master WHERE name = 't'").value(), 0);
}

TEST(Schema, MigrationsOutOfOrderAreRefused) {
  TempDir dir;
  auto connection = raw(dir.file("steps.db"));
  const db::Migration steps[] = {{2, "skips one", "CREATE TABLE t (x INTEGER)"}};
  EXPECT_EQ(db::migrate(*connection, steps).code(), StatusCode::kInternal);
}

// The query plan is what keeps best-config queries at a millisecond on a large history: an index
// search in cost order, never a scan or a sort.
TEST(Schema, BestQueriesReadAPartialIndexWithoutSorting) {
  TempDir dir;
  std::string path = dir.file("history.db");
  ASSERT_TRUE(db::RecordStore::open(path).ok());
  auto connection = raw(path);
  for (bool by_device : {true, false}) {
    auto plan = connection->prepare("EXPLAIN QUERY PLAN " + db::best_query_sql(by_device)).value();
    std::string text;
    while (plan.step().value()) text += std::string(plan.column_text(3)) + "\n";
    std::string index = by_device ? "records_best_by_device" : "records_best ";
    EXPECT_NE(text.find("SEARCH r USING INDEX " + index), std::string::npos) << text;
    EXPECT_EQ(text.find("TEMP B-TREE"), std::string::npos) << text;
    EXPECT_EQ(text.find("SCAN"), std::string::npos) << text;
  }
  // And the measurements of one config, whose figure ranks it.
  auto plan = connection->prepare("EXPLAIN QUERY PLAN " + db::config_measurements_sql()).value();
  std::string text;
  while (plan.step().value()) text += std::string(plan.column_text(3)) + "\n";
  EXPECT_NE(text.find("SEARCH r USING INDEX records_by_config"), std::string::npos) << text;
  EXPECT_EQ(text.find("TEMP B-TREE"), std::string::npos) << text;
}

}  // namespace
}  // namespace tunefarm
