// The history's connection to SQLite (db/connection.h), over SQLite's C API: a connection, its
// cached prepared statements, and SQLite's result codes turned into Status values a user can act
// on. Lock contention and damaged files are handled here, in one place.
//
// SQLite's busy codes come back as kAborted ("try again"); retry_while_busy() retries them and,
// when another process holds the lock for too long, answers kUnavailable with a message that says
// so. The raw "database is locked" text never leaves this file.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "db/connection.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tunefarm::db {

class SqliteConnection final : public Connection {
 public:
  // Opens (for kReadWrite: creates) the database file.
  static StatusOr<std::unique_ptr<Connection>> open(const std::string& path, Mode mode,
                                                    std::chrono::milliseconds busy_timeout);
  ~SqliteConnection() override;

  Status exec(std::string_view sql) override;
  StatusOr<Statement> prepare(std::string_view sql) override;
  int64_t changes() const override;
  Dialect dialect() const override { return Dialect::kSqlite; }

  // The Status for SQLite result code `rc` from this connection; `what` names the operation.
  Status error(int rc, std::string_view what) const;
  void give_back(std::string sql, sqlite3_stmt* stmt);

 private:
  SqliteConnection(sqlite3* handle, std::string path) : Connection(std::move(path)), handle_(handle) {}

  sqlite3* handle_;
  std::unordered_map<std::string, std::vector<sqlite3_stmt*>> idle_statements_;
};

}  // namespace tunefarm::db
