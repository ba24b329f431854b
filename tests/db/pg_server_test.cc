// The test PostgreSQL itself: it serves, databases are separate, a stop is an outage that a start
// ends, and no server is left once it is gone.
#include "pg_server.h"

#include <filesystem>

#include <gtest/gtest.h>
#include <libpq-fe.h>

namespace tunefarm::testing {
namespace {

// The single text value `sql` answers on `url`, or the error.
std::string query(const std::string& url, const std::string& sql) {
  PGconn* conn = PQconnectdb(url.c_str());
  std::string answer;
  if (PQstatus(conn) != CONNECTION_OK) {
    answer = std::string("error: ") + PQerrorMessage(conn);
  } else {
    PGresult* result = PQexec(conn, sql.c_str());
    ExecStatusType status = PQresultStatus(result);
    if (status == PGRES_TUPLES_OK && PQntuples(result) == 1) answer = PQgetvalue(result, 0, 0);
    else if (status != PGRES_COMMAND_OK) answer = std::string("error: ") + PQerrorMessage(conn);
    PQclear(result);
  }
  PQfinish(conn);
  return answer;
}

TEST(PgServerTest, ServesSeparateDatabasesAsAnUnprivilegedUser) {
  if (auto why = PgServer::unavailable()) GTEST_SKIP() << *why;
  PgServer& server = PgServer::shared();
  std::string a = server.new_database();
  std::string b = server.new_database();
  EXPECT_NE(a, b);
  EXPECT_EQ(query(a, "CREATE TABLE t (x int)"), "");
  EXPECT_EQ(query(a, "SELECT count(*) FROM t"), "0");
  EXPECT_NE(query(b, "SELECT count(*) FROM t").find("does not exist"), std::string::npos);
  // Never the superuser of the machine: PostgreSQL refuses root, and tests must not need it.
  EXPECT_EQ(query(a, "SELECT current_setting('data_directory') IS NOT NULL"), "t");
}

TEST(PgServerTest, AStopIsAnOutageThatAStartEndsAndNothingIsLeftOnceItIsGone) {
  if (auto why = PgServer::unavailable()) GTEST_SKIP() << *why;
  std::string url;
  {
    PgServer server;
    url = server.new_database();
    EXPECT_EQ(query(url, "CREATE TABLE t (x int)"), "");
    server.stop();
    EXPECT_EQ(query(url, "SELECT 1").rfind("error: ", 0), 0u);
    server.start();
    EXPECT_EQ(query(url, "SELECT count(*) FROM t"), "0");
  }
  EXPECT_EQ(query(url + "?connect_timeout=2", "SELECT 1").rfind("error: ", 0), 0u);
}

}  // namespace
}  // namespace tunefarm::testing
