// What the history's code sees of a database: a connection, its prepared statements, and errors as
// Status values a user can act on. Two implementations: SQLite (db/sqlite.h), the embedded default
// of one tunerd, and PostgreSQL (db/postgres.h), which several tunerds share. The store's SQL is
// written once for both: parameters are ?N (PostgreSQL's connection turns them into $N) and typed by
// how they are bound; where the two dialects differ, the code asks dialect().
//
// A busy database (SQLite's lock, PostgreSQL's serialization failures and deadlocks) answers
// kAborted ("try again"), which retry_while_busy() retries; a database that cannot be reached, or
// whose disk is failing, answers kUnavailable or kResourceExhausted: an outage the writer waits out.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tunefarm::db {

enum class Dialect { kSqlite, kPostgres };

// Whether `location` names a PostgreSQL database (postgresql:// or postgres://) rather than a file.
bool is_postgres_url(std::string_view location);

// A prepared statement borrowed from its connection; reset and given back on destruction.
// Parameter indexes start at 1 and column indexes at 0, as in SQLite.
class Statement {
 public:
  class Impl {
   public:
    virtual ~Impl() = default;
    virtual void bind(int index, int64_t value) = 0;
    virtual void bind(int index, double value) = 0;
    virtual void bind(int index, std::string_view text) = 0;
    virtual void bind_blob(int index, std::string_view bytes) = 0;
    virtual void bind_null(int index) = 0;
    virtual StatusOr<bool> step() = 0;
    virtual void reset() = 0;
    virtual int64_t column_int(int column) const = 0;
    virtual double column_double(int column) const = 0;
    virtual std::string_view column_text(int column) const = 0;
    virtual std::string_view column_blob(int column) const = 0;
    virtual bool column_is_null(int column) const = 0;
  };

  explicit Statement(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Statement(Statement&& other) noexcept = default;
  Statement& operator=(Statement&&) = delete;
  ~Statement() = default;

  void bind(int index, int64_t value) { impl_->bind(index, value); }
  void bind(int index, double value) { impl_->bind(index, value); }
  void bind(int index, std::string_view text) { impl_->bind(index, text); }
  void bind_blob(int index, std::string_view bytes) { impl_->bind_blob(index, bytes); }
  void bind_null(int index) { impl_->bind_null(index); }

  // Advances to the next row: true when there is one, false when the statement is done.
  StatusOr<bool> step() { return impl_->step(); }
  // Steps a statement that returns no rows.
  Status run();
  // Makes the statement ready to run again with new parameters.
  void reset() { impl_->reset(); }

  int64_t column_int(int column) const { return impl_->column_int(column); }
  double column_double(int column) const { return impl_->column_double(column); }
  std::string_view column_text(int column) const { return impl_->column_text(column); }
  std::string_view column_blob(int column) const { return impl_->column_blob(column); }
  bool column_is_null(int column) const { return impl_->column_is_null(column); }

 private:
  std::unique_ptr<Impl> impl_;
};

class Connection {
 public:
  enum class Mode { kReadWrite, kReadOnly };

  // Opens the history at `location`: a PostgreSQL URL (db/postgres.h), or a SQLite file, which
  // kReadWrite creates. `busy_timeout` is how long one call waits for another's lock before
  // answering busy. `reply_timeout`: how long a PostgreSQL server may stay silent while a command
  // waits for its answer before the connection is taken for broken (db/postgres.h).
  static StatusOr<std::unique_ptr<Connection>> open(const std::string& location, Mode mode,
                                                    std::chrono::milliseconds busy_timeout,
                                                    std::chrono::milliseconds reply_timeout = std::chrono::seconds(60));
  virtual ~Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs one or more statements that return no rows.
  virtual Status exec(std::string_view sql) = 0;
  // A statement, prepared on first use and cached.
  virtual StatusOr<Statement> prepare(std::string_view sql) = 0;
  // The single integer a query such as "PRAGMA user_version" answers.
  StatusOr<int64_t> query_int(std::string_view sql);
  // Rows changed by the last statement that changed any.
  virtual int64_t changes() const = 0;
  virtual Dialect dialect() const = 0;
  // The file or URL, for messages (a URL never holds a password: db/postgres.h refuses those).
  const std::string& path() const { return path_; }

 protected:
  explicit Connection(std::string path) : path_(std::move(path)) {}

 private:
  std::string path_;
};

// Runs `attempt` again while it fails with kAborted (the database was busy), sleeping a little
// longer each time, for at most `budget` in all; then gives up with kUnavailable naming `path`.
Status retry_while_busy(const std::function<Status()>& attempt, std::chrono::milliseconds budget,
                        std::string_view path);

}  // namespace tunefarm::db
