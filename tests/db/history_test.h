// The store suite runs on both back ends: a test derived from HistoryTest gets its histories from
// location(name), a SQLite file or a new PostgreSQL database of the test server (pg_server.h).
// db_test runs the SQLite instances and db_pg_test the PostgreSQL ones (test_backends() differs
// between them), so that the server starts once per process rather than once per test.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "db_test_util.h"
#include "pg_server.h"

namespace tunefarm::testing {

enum class Backend { kSqlite, kPostgres };

// The back ends this test binary runs the suite on.
std::vector<Backend> test_backends();

// How ctest's test names show the parameter.
inline void PrintTo(Backend backend, std::ostream* out) { *out << (backend == Backend::kSqlite ? "sqlite" : "postgres"); }

inline std::string backend_name(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "Sqlite" : "Postgres";
}

class HistoryTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kPostgres) {
      if (auto why = PgServer::unavailable()) GTEST_SKIP() << *why;
    }
  }

  // Where the history called `name` of this test lives; the same name, the same history.
  std::string location(const std::string& name = "history") {
    auto [it, added] = histories_.try_emplace(name);
    if (added)
      it->second = GetParam() == Backend::kSqlite ? dir_.file(name + ".db") : PgServer::shared().new_database();
    return it->second;
  }

  TempDir dir_;

 private:
  std::map<std::string, std::string> histories_;
};

}  // namespace tunefarm::testing

// Runs the HistoryTest-derived `suite` on this binary's back ends.
#define TUNEFARM_ON_BOTH_BACKENDS(suite) \
  INSTANTIATE_TEST_SUITE_P(Backends, suite, ::testing::ValuesIn(::tunefarm::testing::test_backends()), \
                           ::tunefarm::testing::backend_name)
