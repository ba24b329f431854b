// The history's connection to PostgreSQL (db/connection.h), over libpq: a history that several
// tunerds share. The URL is libpq's (postgresql://user@host:port/db?sslmode=...); a URL that holds a
// password is refused, since command lines and config files show up in process listings and logs:
// the password comes from ~/.pgpass, a file named by PGPASSFILE or the URL's passfile parameter, or
// PGPASSWORD, as libpq reads them.
//
// Statements are prepared on the server once per connection and kept; rows stream one at a time
// (libpq's single-row mode), so an export of millions of records holds one in memory. A connection
// that breaks is opened again at the start of the next transaction, never inside one: a transaction
// cut off answers kUnavailable until it is rolled back.
#pragma once

#include <chrono>
#include <string>
#include <unordered_map>

#include "db/connection.h"

struct pg_conn;
struct pg_result;

namespace tunefarm::db {

class PostgresStatement;

// OK, or INVALID_ARGUMENT when `url` does not parse or holds a password (saying where to put it).
Status check_postgres_url(const std::string& url);

// `sql` with SQLite's ?N (and bare ?) parameters written as PostgreSQL's $N.
std::string postgres_parameters(std::string_view sql);

class PostgresConnection final : public Connection {
 public:
  // Connects; kReadOnly makes every transaction read-only. `busy_timeout` bounds each wait for a
  // row lock (lock_timeout), after which the call answers busy. A server silent for `reply_timeout`
  // (at least the busy timeout and a second) while a command waits for its answer is taken for
  // gone: the connection is closed and the command answers kUnavailable.
  static StatusOr<std::unique_ptr<Connection>> open(const std::string& url, Mode mode,
                                                    std::chrono::milliseconds busy_timeout,
                                                    std::chrono::milliseconds reply_timeout);
  ~PostgresConnection() override;

  Status exec(std::string_view sql) override;
  StatusOr<Statement> prepare(std::string_view sql) override;
  int64_t changes() const override { return changes_; }
  Dialect dialect() const override { return Dialect::kPostgres; }

 private:
  friend class PostgresStatement;
  PostgresConnection(pg_conn* conn, std::string url, std::string setup);

  // Makes the connection usable for `sql`: the rows of a statement still streaming are read into
  // it first, and a broken connection is opened again when `sql` starts a transaction (or runs
  // outside one).
  Status ready_for(std::string_view sql);
  // The server-side name of `sql` prepared with `types`, preparing it on first use.
  StatusOr<std::string> prepared(const std::string& sql, const std::string& types_key, int n, const unsigned* types);
  // The Status of a failed command; `result` may be null (the connection broke).
  Status error(const pg_result* result, std::string_view what);
  // Notes whether the connection is inside a transaction after a command.
  void track_transaction();
  // PQgetResult, waiting at most reply_timeout_ of silence from the server.
  pg_result* next_result();
  // Every result of the command sent, as PQexec answers: the last, or the first error.
  pg_result* last_result();
  // PQexec with the same bound.
  pg_result* run(const std::string& sql);

  pg_conn* conn_;
  std::chrono::milliseconds reply_timeout_{60000};
  std::string setup_;  // Session settings, sent again after a reconnect.
  int64_t changes_ = 0;
  bool in_transaction_ = false;
  std::unordered_map<std::string, std::string> prepared_;  // SQL and parameter types -> statement name.
  PostgresStatement* streaming_ = nullptr;                 // The statement whose rows are on the wire.
};

}  // namespace tunefarm::db
