// What only the PostgreSQL back end has: URLs and their passwords, migrations raced by several
// tunerds, histories shared by several stores at once, and a server that goes away and comes back.
#include "db/postgres.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <thread>

#include "db/copy_history.h"
#include "db/queries.h"
#include "db/record_store.h"
#include "db/schema.h"
#include "history_test.h"

namespace tunefarm {
namespace {

using testing::make_record;
using testing::PgServer;

class PostgresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = PgServer::unavailable()) GTEST_SKIP() << *why;
  }
};

TEST(PostgresUrlTest, APasswordInTheUrlIsRefusedSayingWhereItGoes) {
  for (std::string url : {"postgresql://tunefarm:s3cret@db.example/history",
                          "postgresql://db.example/history?password=s3cret", "postgres://u:s3cret@h/d"}) {
    Status status = db::check_postgres_url(url);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << url;
    EXPECT_NE(status.message().find(".pgpass"), std::string::npos) << status.message();
    EXPECT_EQ(status.message().find("s3cret"), std::string::npos) << status.message();
    EXPECT_EQ(db::RecordStore::open(url).status().code(), StatusCode::kInvalidArgument) << url;
  }
  EXPECT_TRUE(db::check_postgres_url("postgresql://tunefarm@db.example:5433/history?sslmode=require").ok());
  EXPECT_EQ(db::check_postgres_url("postgresql://[oops").code(), StatusCode::kInvalidArgument);
}

TEST(PostgresUrlTest, ParametersBecomeDollarNumbers) {
  EXPECT_EQ(db::postgres_parameters("SELECT ?2, ?1, '?', ?, \"a?\" WHERE x = ?10"),
            "SELECT $2, $1, '?', $1, \"a?\" WHERE x = $10");
}

TEST_F(PostgresTest, TunerdsStartingTogetherMigrateOnce) {
  std::string url = PgServer::shared().new_database();
  std::vector<std::thread> starts;
  std::vector<Status> results(6);
  for (size_t i = 0; i < results.size(); ++i)
    starts.emplace_back([&, i] { results[i] = db::RecordStore::open(url).status(); });
  for (auto& t : starts) t.join();
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.to_string();
  auto connection = db::Connection::open(url, db::Connection::Mode::kReadOnly, std::chrono::seconds(1)).value();
  EXPECT_EQ(connection->query_int("SELECT count(*) FROM tunefarm_schema").value(), 1);
  EXPECT_EQ(connection->query_int("SELECT version FROM tunefarm_schema").value(),
            db::postgres_migrations().back().version);
}

// A history written before the best query's covering indexes (schema 2) gets them once, however
// many tunerds start on it at once, and answers best queries as it did: from the indexes alone.
TEST_F(PostgresTest, AnOlderHistoryGetsTheBestQueryIndexesOnceAndAnswersAsBefore) {
  std::string url = PgServer::shared().new_database();
  {
    auto connection = db::Connection::open(url, db::Connection::Mode::kReadWrite, std::chrono::seconds(5)).value();
    ASSERT_TRUE(db::migrate(*connection, db::postgres_migrations().first(2)).ok());
  }
  auto cost = [](int i) { return 1e-3 * (1 + i % 5); };
  {
    // Written as schema 2 has it: the store's migration would add the indexes first.
    auto connection = db::Connection::open(url, db::Connection::Mode::kReadWrite, std::chrono::seconds(5)).value();
    ASSERT_TRUE(connection->exec("INSERT INTO workloads (text) VALUES ('matmul:M=64,N=64,K=64')").ok());
    ASSERT_TRUE(connection->exec("INSERT INTO targets (text) VALUES ('llvm')").ok());
    for (int i = 0; i < 40; ++i) {
      ASSERT_TRUE(connection
                      ->exec(fmt::format(
                          "INSERT INTO records (workload_id, target_id, device_key, config, config_index, costs, "
                          "mean_cost_s, gflops, error_code, error_msg, build_time_s, started_at_us, finished_at_us, "
                          "job_id, agent_id, attempts) VALUES (1, 1, 'local-cpu', '{}', {}, '[{}]', {}, 1, 0, '', 0, "
                          "{}, {}, 'job-1', 'agent-a', 1)",
                          testing::config(i % 8).to_json(), i % 8, cost(i), cost(i), 1'000'000 + i, 1'000'100 + i))
                      .ok());
    }
  }
  std::vector<std::thread> starts;
  std::vector<Status> results(4);
  for (size_t i = 0; i < results.size(); ++i)
    starts.emplace_back([&, i] { results[i] = db::RecordStore::open(url).status(); });
  for (auto& t : starts) t.join();
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.to_string();
  auto connection = db::Connection::open(url, db::Connection::Mode::kReadOnly, std::chrono::seconds(1)).value();
  EXPECT_EQ(connection->query_int("SELECT version FROM tunefarm_schema").value(),
            db::postgres_migrations().back().version);
  EXPECT_EQ(connection->query_int("SELECT count(*) FROM pg_indexes WHERE tablename = 'records' AND indexdef LIKE "
                                  "'%INCLUDE%'")
                .value(),
            3);
  auto store = db::RecordStore::open(url).value();
  auto best = store->query_best(testing::workload("matmul:M=64,N=64,K=64"), testing::target("llvm"), "local-cpu", 3);
  ASSERT_TRUE(best.ok()) << best.status().to_string();
  // Each config's five measurements cost 1, 2, 3, 4, 5 ms in some order, all with the same median.
  ASSERT_EQ(best->size(), 3u);
  for (const v1::Record& record : *best) EXPECT_DOUBLE_EQ(record.mean_cost_s(), 3e-3);
}

TEST_F(PostgresTest, ADatabaseOfAnotherProgramIsLeftAlone) {
  std::string url = PgServer::shared().new_database();
  {
    auto connection = db::Connection::open(url, db::Connection::Mode::kReadWrite, std::chrono::seconds(1)).value();
    ASSERT_TRUE(connection->exec("CREATE TABLE records (invoice int)").ok());
  }
  auto opened = db::RecordStore::open(url);
  EXPECT_EQ(opened.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(opened.status().message().find("not a tunefarm history"), std::string::npos);
}

TEST_F(PostgresTest, StoresSharingAHistoryAddTheSameWorkloadsAtOnce) {
  std::string url = PgServer::shared().new_database();
  auto a = db::RecordStore::open(url).value();
  auto b = db::RecordStore::open(url).value();
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      db::RecordStore& store = w == 0 ? *a : *b;
      for (int i = 0; i < 20; ++i) {
        std::string workload = "matmul:M=" + std::to_string(16 + i) + ",N=64,K=64";
        EXPECT_TRUE(store.insert({make_record({.workload = workload, .config = i, .agent_id = w ? "b" : "a"})}).ok());
      }
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(a->list_records({})->total, 40);
  EXPECT_EQ(b->list_records({})->total, 40);
}

TEST_F(PostgresTest, MeasurementsAreHeldWhileTheServerIsDownAndWrittenWhenItIsBack) {
  PgServer& server = PgServer::shared();
  std::string url = server.new_database();
  db::RecordStoreOptions options;
  options.busy_budget = std::chrono::milliseconds(2000);
  auto store = db::RecordStore::open(url, options).value();
  ASSERT_TRUE(store->insert({make_record({.config = 1})}).ok());
  server.stop();
  ASSERT_TRUE(store->add({make_record({.config = 2})}).ok());
  // The writer notices the outage on its first try and holds the record.
  for (int i = 0; i < 200 && store->write_outage().ok(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(store->write_outage().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(store->list_records({}).ok());
  server.start();
  EXPECT_TRUE(store->flush().ok());
  EXPECT_TRUE(store->write_outage().ok());
  EXPECT_EQ(store->list_records({})->total, 2);
}

// A writer cut off in the middle of a transaction (a partition: its session sits idle in the
// transaction, and a proxy between may keep acknowledging) must not hold its row locks for good:
// the server ends the session, and another writer gets the row (a job taken over) in seconds.
TEST_F(PostgresTest, AWriterSilentInsideATransactionLetsGoOfItsLocks) {
  std::string url = PgServer::shared().new_database();
  using std::chrono::milliseconds;
  auto cut = db::PostgresConnection::open(url, db::Connection::Mode::kReadWrite, milliseconds(500), milliseconds(2000));
  ASSERT_TRUE(cut.ok()) << cut.status().to_string();
  ASSERT_TRUE((*cut)->exec("CREATE TABLE held (id INTEGER PRIMARY KEY, v INTEGER); INSERT INTO held VALUES (1, 0)").ok());
  ASSERT_TRUE((*cut)->exec("BEGIN; UPDATE held SET v = 1 WHERE id = 1").ok());
  auto other = db::PostgresConnection::open(url, db::Connection::Mode::kReadWrite, milliseconds(30000), milliseconds(40000));
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  auto start = std::chrono::steady_clock::now();
  Status taken = (*other)->exec("UPDATE held SET v = 2 WHERE id = 1");
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(taken.ok()) << taken.to_string();
  EXPECT_LT(waited, 20.0);
  std::printf("the row was free %.1f s after its writer fell silent\n", waited);
}

// A prepared best query must keep one plan (PostgreSQL's generic plan) rather than be planned on
// every call: with a bound number of candidates, a history of many measurements of one task across
// device keys made PostgreSQL plan each call anew, half the time of a best query at 1M records.
TEST_F(PostgresTest, BestQueriesArePlannedOnceNotOnEveryCall) {
  std::string url = PgServer::shared().new_database();
  auto store = db::RecordStore::open(url).value();
  std::vector<v1::Record> records;
  for (int i = 0; i < 2000; ++i) {
    records.push_back(make_record({.device_key = i % 2 ? "cpu-a" : "cpu-b",
                                   .config = i % 100,
                                   .cost = 1e-3 * (1 + (i * 7919 % 2000) / 1000.0),
                                   .started_at_us = 1'700'000'000'000'000 + i}));
  }
  ASSERT_TRUE(store->insert(records).ok());
  auto connection = db::Connection::open(url, db::Connection::Mode::kReadWrite, std::chrono::seconds(5)).value();
  ASSERT_TRUE(connection->exec("ANALYZE records").ok());
  for (bool by_device : {false, true}) {
    for (int top_k : {1, 10}) {
      std::string name = fmt::format("best_{}_{}", by_device, top_k);
      ASSERT_TRUE(connection
                      ->exec(fmt::format("PREPARE {}(text, text, bigint, text, bigint) AS {}", name,
                                         db::postgres_parameters(db::best_figures_sql(
                                             by_device, db::figures_candidates(16 * top_k)))))
                      .ok());
      for (int i = 0; i < 12; ++i) {
        ASSERT_TRUE(connection
                        ->exec(fmt::format("EXECUTE {}('matmul:M=64,N=64,K=64', 'llvm', 0, 'cpu-a', {})", name, top_k))
                        .ok());
      }
      // PostgreSQL tries five plans made for the values before it weighs the generic one.
      auto plans = [&](const char* kind) {
        return connection
            ->query_int(fmt::format("SELECT {} FROM pg_prepared_statements WHERE name = '{}'", kind, name))
            .value();
      };
      EXPECT_EQ(plans("custom_plans"), 5) << name;
      EXPECT_EQ(plans("generic_plans"), 7) << name;
    }
  }
}

v1::JobSpec job_spec() {
  v1::JobSpec spec;
  *spec.add_tasks()->mutable_workload() = to_proto(testing::workload("matmul:M=64,N=64,K=64"));
  *spec.mutable_target() = to_proto(testing::target("llvm"));
  spec.set_device_key("local-cpu");
  spec.set_trials(8);
  return spec;
}

TEST_F(PostgresTest, AnExpiredLeaseIsTakenOverAndTheOldHoldersWritesAreFenced) {
  std::string url = PgServer::shared().new_database();
  auto a = db::RecordStore::open(url).value();
  auto b = db::RecordStore::open(url).value();
  ASSERT_TRUE(a->shared());
  std::string id = a->create_job(job_spec())->id();
  auto lease = std::chrono::milliseconds(300);
  EXPECT_EQ(a->acquire_lease(id, "a", lease).value(), 1);
  EXPECT_EQ(b->acquire_lease(id, "b", lease).value(), std::nullopt);  // Held by a.
  EXPECT_EQ(b->unleased_jobs(10)->size(), 0u);
  EXPECT_TRUE(a->update_job_state(id, v1::RUNNING).ok());
  EXPECT_EQ(a->insert({make_record({.config = 1, .job_id = id})}).value(), 1);
  auto renewed = a->renew_leases("a", lease).value();
  ASSERT_EQ(renewed.size(), 1u);
  EXPECT_TRUE(renewed[0].held);

  std::this_thread::sleep_for(lease + std::chrono::milliseconds(100));  // a stops renewing: cut off.
  EXPECT_EQ(b->unleased_jobs(10).value(), std::vector<std::string>{id});
  EXPECT_EQ(b->acquire_lease(id, "b", lease).value(), 2);
  // Every write of a about the job is refused now; b's go through.
  EXPECT_EQ(a->insert({make_record({.config = 2, .job_id = id})}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(a->update_job_progress(id, {}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(a->update_job_state(id, v1::SUCCEEDED).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(a->renew_leases("a", lease).value()[0].held);
  // Records of other jobs (an import) are not a's lease's business.
  EXPECT_EQ(a->insert({make_record({.config = 3, .job_id = "job-elsewhere"})}).value(), 1);
  EXPECT_EQ(b->insert({make_record({.config = 2, .job_id = id})}).value(), 1);
  EXPECT_EQ(b->update_job_state(id, v1::SUCCEEDED)->state(), v1::SUCCEEDED);
  db::RecordFilter of_job;
  of_job.job_id = id;
  EXPECT_EQ(b->list_records(of_job)->total, 2);
}

TEST_F(PostgresTest, ACancelReachesTheHolderOrEndsAJobNobodyRuns) {
  std::string url = PgServer::shared().new_database();
  auto a = db::RecordStore::open(url).value();
  auto b = db::RecordStore::open(url).value();
  std::string held = a->create_job(job_spec())->id();
  std::string idle = a->create_job(job_spec())->id();
  ASSERT_TRUE(a->acquire_lease(held, "a", std::chrono::seconds(30)).value());
  EXPECT_EQ(b->request_cancel(held)->state(), v1::QUEUED);
  auto renewed = a->renew_leases("a", std::chrono::seconds(30)).value();
  ASSERT_EQ(renewed.size(), 1u);
  EXPECT_TRUE(renewed[0].cancel_requested);
  EXPECT_EQ(b->request_cancel(idle)->state(), v1::CANCELLED);
  EXPECT_EQ(b->request_cancel(idle).status().code(), StatusCode::kFailedPrecondition);
  // A lease given up is free at once.
  ASSERT_TRUE(a->release_lease(held).ok());
  EXPECT_EQ(b->acquire_lease(held, "b", std::chrono::seconds(30)).value(), 2);
}

TEST_F(PostgresTest, ASqliteHistoryMovesWithItsJobsAndCopyingAgainSkipsWhatIsThere) {
  testing::TempDir dir;
  auto sqlite = db::RecordStore::open(dir.file("history.db")).value();
  v1::Job running = sqlite->create_job(job_spec()).value();
  running = sqlite->update_job_state(running.id(), v1::RUNNING).value();
  std::string done = sqlite->create_job(job_spec())->id();
  ASSERT_TRUE(sqlite->update_job_state(done, v1::SUCCEEDED).ok());
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(sqlite->add({make_record({.config = i, .job_id = running.id()})}).ok());
  ASSERT_TRUE(sqlite->flush().ok());

  auto postgres = db::RecordStore::open(PgServer::shared().new_database()).value();
  auto report = db::copy_history(*sqlite, *postgres);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->jobs, 2);
  EXPECT_EQ(report->records, 7);
  v1::Job moved = postgres->get_job(running.id()).value();
  EXPECT_TRUE(testing::same(moved, running));
  EXPECT_EQ(postgres->get_job(done)->state(), v1::SUCCEEDED);
  EXPECT_EQ(postgres->count_measured_configs(running.id()).value(), 7);
  // The running job is one a tunerd of the new history takes and resumes.
  EXPECT_EQ(postgres->unleased_jobs(10).value(), std::vector<std::string>{running.id()});
  report = db::copy_history(*sqlite, *postgres);
  EXPECT_EQ(report->jobs_skipped, 2);
  EXPECT_EQ(report->records_skipped, 7);
}

// A job moves with the request id it was submitted with: a client that resubmits after the move
// gets that job, not a second one. Of two histories merged into one, the job that came first keeps
// a request id both have; the other moves without it.
TEST_F(PostgresTest, JobsMoveWithTheirRequestIds) {
  testing::TempDir dir;
  db::JobRequest request{"sha256:x", "resubmit-me"};
  auto first = db::RecordStore::open(dir.file("first.db")).value();
  std::string made = first->create_job(job_spec(), request)->job.id();
  auto second = db::RecordStore::open(dir.file("second.db")).value();
  std::string other = second->create_job(job_spec(), request)->job.id();

  auto postgres = db::RecordStore::open(PgServer::shared().new_database()).value();
  ASSERT_TRUE(db::copy_history(*first, *postgres).ok());
  auto found = postgres->find_requested_job(request, job_spec());
  ASSERT_TRUE(found.ok()) << found.status().to_string();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->id(), made);
  EXPECT_EQ(postgres->create_job(job_spec(), request)->job.id(), made);

  auto merged = db::copy_history(*second, *postgres);
  ASSERT_TRUE(merged.ok()) << merged.status().to_string();
  EXPECT_EQ(merged->jobs, 1);
  EXPECT_EQ(postgres->get_job(other)->state(), v1::QUEUED);
  EXPECT_EQ((*postgres->find_requested_job(request, job_spec()))->id(), made);
}

}  // namespace
}  // namespace tunefarm
