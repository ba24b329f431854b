#include "db/sqlite.h"

#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "db/postgres.h"

namespace tunefarm::db {
namespace {

class SqliteStatement final : public Statement::Impl {
 public:
  SqliteStatement(SqliteConnection* connection, sqlite3_stmt* stmt, std::string sql)
      : connection_(connection), stmt_(stmt), sql_(std::move(sql)) {}
  ~SqliteStatement() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    connection_->give_back(std::move(sql_), stmt_);
  }

  // Bind errors can only come from a wrong index or type in this folder's own SQL: tests catch them.
  void bind(int index, int64_t value) override { sqlite3_bind_int64(stmt_, index, value); }
  void bind(int index, double value) override { sqlite3_bind_double(stmt_, index, value); }
  // An empty string_view may have no data pointer, which SQLite would store as NULL.
  void bind(int index, std::string_view text) override {
    sqlite3_bind_text(stmt_, index, text.empty() ? "" : text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  }
  void bind_blob(int index, std::string_view bytes) override {
    sqlite3_bind_blob(stmt_, index, bytes.empty() ? "" : bytes.data(), static_cast<int>(bytes.size()),
                      SQLITE_TRANSIENT);
  }
  void bind_null(int index) override { sqlite3_bind_null(stmt_, index); }

  StatusOr<bool> step() override {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return connection_->error(rc, "running a query");
  }

  void reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  int64_t column_int(int column) const override { return sqlite3_column_int64(stmt_, column); }
  double column_double(int column) const override { return sqlite3_column_double(stmt_, column); }
  std::string_view column_text(int column) const override {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
    return text ? std::string_view(text, sqlite3_column_bytes(stmt_, column)) : std::string_view();
  }
  std::string_view column_blob(int column) const override {
    const auto* data = static_cast<const char*>(sqlite3_column_blob(stmt_, column));
    return data ? std::string_view(data, sqlite3_column_bytes(stmt_, column)) : std::string_view();
  }
  bool column_is_null(int column) const override { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

 private:
  SqliteConnection* connection_;
  sqlite3_stmt* stmt_;
  std::string sql_;
};

}  // namespace

bool is_postgres_url(std::string_view location) {
  return location.starts_with("postgresql://") || location.starts_with("postgres://");
}

Status Statement::run() {
  TF_ASSIGN_OR_RETURN(bool row, step());
  (void)row;
  return Status();
}

StatusOr<std::unique_ptr<Connection>> Connection::open(const std::string& location, Mode mode,
                                                       std::chrono::milliseconds busy_timeout,
                                                       std::chrono::milliseconds reply_timeout) {
  if (is_postgres_url(location)) return PostgresConnection::open(location, mode, busy_timeout, reply_timeout);
  return SqliteConnection::open(location, mode, busy_timeout);
}

StatusOr<int64_t> Connection::query_int(std::string_view sql) {
  TF_ASSIGN_OR_RETURN(Statement stmt, prepare(sql));
  TF_ASSIGN_OR_RETURN(bool row, stmt.step());
  if (!row) return internal_error(fmt::format("'{}' returned no row", sql));
  return stmt.column_int(0);
}

StatusOr<std::unique_ptr<Connection>> SqliteConnection::open(const std::string& path, Mode mode,
                                                             std::chrono::milliseconds busy_timeout) {
  // NOMUTEX: a connection is used by one thread at a time, which the store guarantees.
  int flags = SQLITE_OPEN_NOMUTEX;
  flags |= mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  sqlite3* handle = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &handle, flags, nullptr);
  std::unique_ptr<SqliteConnection> connection(new SqliteConnection(handle, path));
  if (rc != SQLITE_OK) return connection->error(rc, "opening the database");
  sqlite3_extended_result_codes(handle, 1);
  sqlite3_busy_timeout(handle, static_cast<int>(busy_timeout.count()));
  return std::unique_ptr<Connection>(std::move(connection));
}

SqliteConnection::~SqliteConnection() {
  for (auto& [sql, statements] : idle_statements_)
    for (sqlite3_stmt* stmt : statements) sqlite3_finalize(stmt);
  sqlite3_close_v2(handle_);
}

Status SqliteConnection::exec(std::string_view sql) {
  std::string text(sql);
  int rc = sqlite3_exec(handle_, text.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return error(rc, "running a statement");
  return Status();
}

StatusOr<Statement> SqliteConnection::prepare(std::string_view sql) {
  std::string key(sql);
  auto it = idle_statements_.find(key);
  if (it != idle_statements_.end() && !it->second.empty()) {
    sqlite3_stmt* stmt = it->second.back();
    it->second.pop_back();
    return Statement(std::make_unique<SqliteStatement>(this, stmt, std::move(key)));
  }
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(handle_, key.data(), static_cast<int>(key.size()), SQLITE_PREPARE_PERSISTENT, &stmt,
                              nullptr);
  if (rc != SQLITE_OK) return error(rc, "preparing a query");
  return Statement(std::make_unique<SqliteStatement>(this, stmt, std::move(key)));
}

int64_t SqliteConnection::changes() const { return sqlite3_changes64(handle_); }

void SqliteConnection::give_back(std::string sql, sqlite3_stmt* stmt) {
  idle_statements_[std::move(sql)].push_back(stmt);
}

Status SqliteConnection::error(int rc, std::string_view what) const {
  std::string detail = handle_ ? sqlite3_errmsg(handle_) : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      // Retried by retry_while_busy(); SQLite's own wording is deliberately not passed on.
      return Status(StatusCode::kAborted, fmt::format("history database {} is busy ({})", path(), what));
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Status(StatusCode::kDataLoss,
                    fmt::format("history database {} is damaged or is not a database ({}: {}); restore it "
                                "from an export, move it aside, or copy what it still holds into a new "
                                "history with tunerd --salvage FILE --data-dir NEW_DIR",
                                path(), what, detail));
    case SQLITE_FULL:
      return resource_exhausted(fmt::format("disk full while writing history database {}", path()));
    case SQLITE_CANTOPEN:
      return unavailable(fmt::format("cannot open history database {}: {}; check that its directory exists and "
                                     "is writable",
                                     path(), detail));
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return Status(StatusCode::kPermissionDenied,
                    fmt::format("history database {} cannot be written ({}): {}", path(), what, detail));
    case SQLITE_IOERR: {
      // A refused write is, as far as anyone can act on it, a full disk: out of space, past the
      // process's file-size limit or a quota (SQLite reports only ENOSPC as SQLITE_FULL, and the
      // errno is often gone by the time the statement fails).
      int error = handle_ ? sqlite3_system_errno(handle_) : 0;
      std::string why = error ? fmt::format(" ({})", std::strerror(error)) : "";
      if (error == ENOSPC || error == EFBIG || error == EDQUOT ||
          (handle_ && sqlite3_extended_errcode(handle_) == SQLITE_IOERR_WRITE)) {
        return resource_exhausted(fmt::format(
            "writing history database {} failed{}: the disk is full, or a file-size limit or quota is reached; "
            "free space",
            path(), why));
      }
      return unavailable(fmt::format("I/O error on history database {} ({}): {}{}", path(), what, detail, why));
    }
    case SQLITE_CONSTRAINT:
      return Status(StatusCode::kAlreadyExists, fmt::format("{} in {}: {}", what, path(), detail));
    default:
      return internal_error(fmt::format("{} in history database {}: {}", what, path(), detail));
  }
}

Status retry_while_busy(const std::function<Status()>& attempt, std::chrono::milliseconds budget,
                        std::string_view path) {
  auto deadline = std::chrono::steady_clock::now() + budget;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    Status status = attempt();
    if (status.code() != StatusCode::kAborted) return status;
    if (std::chrono::steady_clock::now() + pause > deadline) {
      if (is_postgres_url(path))
        return unavailable(fmt::format("history database {} stayed busy with other tunerds' transactions for {} ms",
                                       path, budget.count()));
      return unavailable(fmt::format("history database {} stayed locked by another process for {} ms; is a "
                                     "second tunerd using the same data directory?",
                                     path, budget.count()));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

}  // namespace tunefarm::db
