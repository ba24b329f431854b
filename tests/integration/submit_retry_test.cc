// Submits sent again over one history in a real PostgreSQL (tests/db/pg_server.h): tune-client
// whose first submit's answer is lost (tunerd still writes the job when the client's deadline
// passes) sends it again and gets the same job; two submits of one request through two tunerds at
// the same moment make one job. The test holds a lock on the jobs table, so that the submits wait
// inside tunerd, where the test can see them, for as long as it wants.
#include <sys/wait.h>

#include <chrono>
#include <functional>
#include <regex>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include "pg_server.h"
#include "tests/integration/farm_harness.h"
#include "tests/integration/tunerd_harness.h"

namespace tunefarm::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// A connection of the test's own to the history, which can hold the jobs table: inserts wait until
// it lets go, reads go on.
class JobsLock {
 public:
  explicit JobsLock(const std::string& url) : conn_(PQconnectdb(url.c_str())), observer_(PQconnectdb(url.c_str())) {}
  ~JobsLock() {
    PQfinish(conn_);
    PQfinish(observer_);
  }
  bool exec(const std::string& sql) {
    PGresult* result = PQexec(conn_, sql.c_str());
    bool ok = PQresultStatus(result) == PGRES_COMMAND_OK || PQresultStatus(result) == PGRES_TUPLES_OK;
    PQclear(result);
    return ok;
  }
  bool hold() { return exec("BEGIN") && exec("LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE"); }
  bool release() { return exec("ROLLBACK"); }
  // On a connection of its own: a transaction sees pg_stat_activity as it was when it first looked.
  int64_t count(const std::string& sql) {
    PGresult* result = PQexec(observer_, sql.c_str());
    int64_t n = PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) > 0 ? std::stoll(PQgetvalue(result, 0, 0)) : -1;
    PQclear(result);
    return n;
  }
  // Inserts of jobs that wait for the lock, as the server sees them.
  int64_t waiting_inserts() {
    return count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO jobs%'");
  }

 private:
  PGconn* conn_;
  PGconn* observer_;
};

class SubmitRetryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = PgServer::unavailable()) GTEST_SKIP() << *why;
    url_ = PgServer::shared().new_database();
    farm_.start_agent("cpu-0");
    ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, seconds(20))) << farm_.logs();
  }

  // A long lease: the heartbeat's renewals wait on the test's lock too, and must not cut the tunerd
  // off meanwhile.
  std::unique_ptr<Tunerd> tunerd(const std::string& name) {
    return std::make_unique<Tunerd>(farm_, farm_.log_dir() + "/" + name,
                                    std::vector<std::string>{"--history", url_, "--lease-s", "60"});
  }

  std::unique_ptr<Process> submit(const Tunerd& tunerd, const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args{"--server", tunerd.address(), "submit", "--workload", "matmul:M=16,N=16,K=16",
                                  "--trials", "4", "--batch-size", "4", "--strategy", "random"};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<Process>(bin_path("tune-client"), args, farm_.log_dir() + "/" + name + ".log");
  }

  // Waits until `done` holds, for at most 30 s.
  static bool wait_for(const std::function<bool()>& done) {
    for (auto deadline = Clock::now() + seconds(30); Clock::now() < deadline;) {
      if (done()) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }

  // The job id a tune-client submit printed, and its exit code.
  static std::string submitted_job(Process& client) {
    int status = client.wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << client.log();
    std::smatch match;
    std::string log = client.log();
    return std::regex_search(log, match, std::regex("submitted job (job-[0-9a-f]+)")) ? match[1].str() : "";
  }

  std::string url_;
  Farm farm_;
};

TEST_F(SubmitRetryTest, ASubmitWhoseAnswerWasLostIsSentAgainAndGetsTheSameJob) {
  auto a = tunerd("a");
  JobsLock lock(url_);
  ASSERT_TRUE(lock.hold());
  auto client = submit(*a, "client", {"--submit-timeout", "1s"});
  // The first try is in tunerd, writing the job, when its deadline passes: its answer is lost.
  ASSERT_TRUE(wait_for([&] { return lock.waiting_inserts() == 1; })) << a->log();
  ASSERT_TRUE(wait_for([&] { return client->log().find("submit try 1 of 5") != std::string::npos; })) << client->log();
  ASSERT_TRUE(lock.release());
  std::string job = submitted_job(*client);
  EXPECT_NE(client->log().find("submit try 1 of 5: submit: Deadline Exceeded"), std::string::npos) << client->log();
  ASSERT_FALSE(job.empty()) << client->log();
  EXPECT_EQ(lock.count("SELECT count(*) FROM jobs"), 1);
  EXPECT_EQ(lock.count(fmt::format("SELECT count(*) FROM jobs WHERE id = '{}'", job)), 1);
  EXPECT_EQ(a->watch(job).state(), v1::SUCCEEDED) << a->log();
}

TEST_F(SubmitRetryTest, OneRequestThroughTwoTunerdsAtOnceMakesOneJob) {
  auto a = tunerd("a");
  auto b = tunerd("b");
  JobsLock lock(url_);
  ASSERT_TRUE(lock.hold());
  auto to_a = submit(*a, "to-a", {"--request-id", "both-at-once"});
  auto to_b = submit(*b, "to-b", {"--request-id", "both-at-once"});
  // Both have looked for the request's job, found none, and are inserting one.
  ASSERT_TRUE(wait_for([&] { return lock.waiting_inserts() == 2; })) << a->log() << b->log();
  ASSERT_TRUE(lock.release());
  std::string from_a = submitted_job(*to_a), from_b = submitted_job(*to_b);
  ASSERT_FALSE(from_a.empty()) << to_a->log();
  EXPECT_EQ(from_a, from_b) << to_b->log();
  EXPECT_EQ(lock.count("SELECT count(*) FROM jobs"), 1);
  EXPECT_EQ(a->watch(from_a).state(), v1::SUCCEEDED) << a->log() << b->log();
}

}  // namespace
}  // namespace tunefarm::testing
