// A thin layer over SQLite's C API: a connection, its cached prepared statements, and SQLite's
// result codes turned into Status values a user can act on. Every other file of db/ reaches
// SQLite through this one, so lock contention and damaged files are handled in one place.
//
// SQLite's busy codes come back as kAborted ("try again"); retry_while_busy() retries them and,
// when another process holds the lock for too long, answers kUnavailable with a message that says
// so. The raw "database is locked" text never leaves this file.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tunefarm::db {

class Connection;

// A prepared statement borrowed from its connection's cache; reset and returned on destruction.
// Parameter indexes start at 1 and column indexes at 0, as in SQLite.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  ~Statement();

  void bind(int index, int64_t value);
  void bind(int index, double value);
  void bind(int index, std::string_view text);
  void bind_blob(int index, std::string_view bytes);
  void bind_null(int index);

  // Advances to the next row: true when there is one, false when the statement is done.
  StatusOr<bool> step();
  // Steps a statement that returns no rows.
  Status run();
  // Makes the statement ready to run again with new parameters.
  void reset();

  int64_t column_int(int column) const;
  double column_double(int column) const;
  std::string_view column_text(int column) const;
  std::string_view column_blob(int column) const;
  bool column_is_null(int column) const;

 private:
  friend class Connection;
  Statement(Connection* connection, sqlite3_stmt* stmt, std::string sql);

  Connection* connection_;
  sqlite3_stmt* stmt_;
  std::string sql_;
};

class Connection {
 public:
  enum class Mode { kReadWrite, kReadOnly };

  // Opens (for kReadWrite: creates) the database file. The busy timeout is how long one SQLite
  // call waits for another connection's lock before answering busy.
  static StatusOr<std::unique_ptr<Connection>> open(const std::string& path, Mode mode,
                                                    std::chrono::milliseconds busy_timeout);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs one or more statements that return no rows.
  Status exec(std::string_view sql);
  // A statement from the cache, prepared on first use.
  StatusOr<Statement> prepare(std::string_view sql);
  // The single integer a query such as "PRAGMA user_version" answers.
  StatusOr<int64_t> query_int(std::string_view sql);

  int64_t changes() const;
  const std::string& path() const { return path_; }

  // The Status for SQLite result code `rc` from this connection; `what` names the operation.
  Status error(int rc, std::string_view what) const;

 private:
  friend class Statement;
  Connection(sqlite3* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void give_back(std::string sql, sqlite3_stmt* stmt);

  sqlite3* handle_;
  std::string path_;
  std::unordered_map<std::string, std::vector<sqlite3_stmt*>> idle_statements_;
};

// Runs `attempt` again while it fails with kAborted (SQLite was busy), sleeping a little longer
// each time, for at most `budget` in all; then gives up with kUnavailable naming `path`.
Status retry_while_busy(const std::function<Status()>& attempt, std::chrono::milliseconds budget,
                        std::string_view path);

}  // namespace tunefarm::db
