#include "db/postgres.h"

#include <libpq-fe.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include <cmath>
#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace tunefarm::db {
namespace {

// The type OIDs of pg_type.h (a server header): what each bind() sends.
constexpr Oid kByteaOid = 17;
constexpr Oid kInt8Oid = 20;
constexpr Oid kTextOid = 25;
constexpr Oid kFloat8Oid = 701;

bool starts_transaction(std::string_view sql) { return sql.starts_with("BEGIN"); }
bool ends_transaction(std::string_view sql) { return sql.starts_with("COMMIT") || sql.starts_with("ROLLBACK"); }

void quiet_notices(void*, const char* message) { spdlog::debug("PostgreSQL: {}", message); }

}  // namespace

Status check_postgres_url(const std::string& url) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
  if (!options) {
    std::string why = error ? error : "out of memory";
    PQfreemem(error);
    // The URL is not repeated: it may hold a password.
    return invalid_argument(fmt::format("the history URL does not parse: {}", why));
  }
  bool has_password = false;
  for (PQconninfoOption* o = options; o->keyword; ++o)
    if (std::string_view(o->keyword) == "password" && o->val && *o->val) has_password = true;
  PQconninfoFree(options);
  if (has_password)
    return invalid_argument(
        "the history URL holds a password, which would show in process listings, config files and logs: give "
        "the URL without it, and put the password in ~/.pgpass of the user tunerd runs as (or a file named by "
        "PGPASSFILE or the URL's passfile parameter), or in the PGPASSWORD environment variable");
  return Status();
}

std::string postgres_parameters(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 8);
  int next = 0;
  char quote = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    char c = sql[i];
    if (quote) {
      if (c == quote) quote = 0;
      out += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '?') {
      out += '$';
      if (i + 1 < sql.size() && sql[i + 1] >= '0' && sql[i + 1] <= '9') continue;  // ?N: the digits follow.
      out += std::to_string(++next);
    } else {
      out += c;
    }
  }
  return out;
}

class PostgresStatement final : public Statement::Impl {
 public:
  PostgresStatement(PostgresConnection* connection, std::string sql)
      : connection_(connection), sql_(std::move(sql)) {}
  ~PostgresStatement() override { reset(); }

  void bind(int index, int64_t value) override { set(index, std::to_string(value), kInt8Oid, 0); }
  void bind(int index, double value) override {
    std::string text = std::isnan(value) ? "NaN"
                       : std::isinf(value) ? (value > 0 ? "Infinity" : "-Infinity")
                                           : fmt::format("{:.17g}", value);
    set(index, std::move(text), kFloat8Oid, 0);
  }
  void bind(int index, std::string_view text) override { set(index, std::string(text), kTextOid, 0); }
  void bind_blob(int index, std::string_view bytes) override { set(index, std::string(bytes), kByteaOid, 1); }
  void bind_null(int index) override {
    set(index, std::nullopt, 0, 0);
  }

  StatusOr<bool> step() override {
    clear_row();
    if (state_ == State::kIdle) TF_RETURN_IF_ERROR(send());
    if (!buffered_.empty()) {
      row_ = buffered_.front();
      buffered_.pop_front();
      return true;
    }
    if (state_ == State::kStreaming) {
      PGresult* result = connection_->next_result();
      if (result && PQresultStatus(result) == PGRES_SINGLE_TUPLE) {
        row_ = result;
        return true;
      }
      finish(result);
    }
    if (!failure_.ok()) return std::exchange(failure_, Status());
    return false;
  }

  void reset() override {
    if (state_ == State::kStreaming) {
      // The rest of the rows are not wanted, but must be read before the connection serves another.
      while (PGresult* result = connection_->next_result()) PQclear(result);
      connection_->streaming_ = nullptr;
      connection_->track_transaction();
    }
    clear_row();
    for (PGresult* row : buffered_) PQclear(row);
    buffered_.clear();
    values_.clear();
    types_.clear();
    formats_.clear();
    failure_ = Status();
    state_ = State::kIdle;
  }

  int64_t column_int(int column) const override {
    const char* value = PQgetvalue(row_, 0, column);
    if (*value == 't') return 1;  // A boolean.
    return std::strtoll(value, nullptr, 10);
  }
  double column_double(int column) const override { return std::strtod(PQgetvalue(row_, 0, column), nullptr); }
  std::string_view column_text(int column) const override {
    return std::string_view(PQgetvalue(row_, 0, column), PQgetlength(row_, 0, column));
  }
  std::string_view column_blob(int column) const override {
    if (PQftype(row_, column) != kByteaOid) return column_text(column);
    auto it = blobs_.find(column);
    if (it == blobs_.end()) {
      size_t length = 0;
      unsigned char* bytes =
          PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(row_, 0, column)), &length);
      std::string blob = bytes ? std::string(reinterpret_cast<const char*>(bytes), length) : std::string();
      PQfreemem(bytes);
      it = blobs_.emplace(column, std::move(blob)).first;
    }
    return it->second;
  }
  bool column_is_null(int column) const override { return PQgetisnull(row_, 0, column) != 0; }

  // Reads the rest of the rows off the wire, so that the connection can serve another statement.
  void buffer_rest() {
    while (state_ == State::kStreaming) {
      PGresult* result = connection_->next_result();
      if (result && PQresultStatus(result) == PGRES_SINGLE_TUPLE) {
        buffered_.push_back(result);
        continue;
      }
      finish(result);
    }
  }

 private:
  enum class State { kIdle, kStreaming, kDone };

  void set(int index, std::optional<std::string> value, Oid type, int format) {
    auto at = static_cast<size_t>(index - 1);
    if (values_.size() <= at) {
      values_.resize(at + 1);
      types_.resize(at + 1, 0);
      formats_.resize(at + 1, 0);
    }
    values_[at] = std::move(value);
    types_[at] = type;
    formats_[at] = format;
  }

  Status send() {
    TF_RETURN_IF_ERROR(connection_->ready_for(sql_));
    std::string types_key(reinterpret_cast<const char*>(types_.data()), types_.size() * sizeof(Oid));
    TF_ASSIGN_OR_RETURN(std::string name, connection_->prepared(sql_, types_key, static_cast<int>(types_.size()),
                                                                types_.data()));
    std::vector<const char*> values;
    std::vector<int> lengths;
    for (const auto& v : values_) {
      values.push_back(v ? v->data() : nullptr);
      lengths.push_back(v ? static_cast<int>(v->size()) : 0);
    }
    PGconn* conn = connection_->conn_;
    if (!PQsendQueryPrepared(conn, name.c_str(), static_cast<int>(values.size()), values.data(), lengths.data(),
                             formats_.data(), 0))
      return connection_->error(nullptr, "sending a query");
    PQsetSingleRowMode(conn);
    connection_->streaming_ = this;
    state_ = State::kStreaming;
    return Status();
  }

  // The statement's last result: how many rows it changed, or why it failed.
  void finish(PGresult* result) {
    ExecStatusType status = result ? PQresultStatus(result) : PGRES_FATAL_ERROR;
    if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
      const char* tuples = PQcmdTuples(result);
      if (*tuples) connection_->changes_ = std::strtoll(tuples, nullptr, 10);
    } else {
      failure_ = connection_->error(result, "running a query");
    }
    PQclear(result);
    while (PGresult* rest = connection_->next_result()) PQclear(rest);
    connection_->streaming_ = nullptr;
    connection_->track_transaction();
    state_ = State::kDone;
  }

  void clear_row() {
    PQclear(row_);
    row_ = nullptr;
    blobs_.clear();
  }

  PostgresConnection* connection_;
  std::string sql_;
  std::vector<std::optional<std::string>> values_;
  std::vector<Oid> types_;
  std::vector<int> formats_;
  State state_ = State::kIdle;
  PGresult* row_ = nullptr;
  std::deque<PGresult*> buffered_;
  Status failure_;
  mutable std::map<int, std::string> blobs_;
};

StatusOr<std::unique_ptr<Connection>> PostgresConnection::open(const std::string& url, Mode mode,
                                                               std::chrono::milliseconds busy_timeout,
                                                               std::chrono::milliseconds reply_timeout) {
  TF_RETURN_IF_ERROR(check_postgres_url(url));
  // Defaults the URL may override: a server that is gone is noticed in seconds, not at the
  // kernel's TCP timeout (minutes), so that a tunerd cut off from its history knows it soon.
  // A connection that does not come up within the reply bound (libpq's least is 2 s) is a server
  // as silent as one that does not answer.
  reply_timeout = std::max(reply_timeout, busy_timeout + std::chrono::seconds(1));
  std::string connect_timeout =
      std::to_string(std::clamp<int64_t>(std::chrono::ceil<std::chrono::seconds>(reply_timeout).count(), 2, 10));
  const char* keywords[] = {"connect_timeout", "keepalives_idle", "keepalives_interval", "keepalives_count",
                            "tcp_user_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {connect_timeout.c_str(), "5", "2", "3", "10000", "tunefarm", url.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  std::string setup = fmt::format("SET lock_timeout = {}; SET client_min_messages = warning", busy_timeout.count());
  if (mode == Mode::kReadOnly) {
    setup += "; SET default_transaction_read_only = on";
  } else {
    // A writer cut off in the middle of a transaction (a network partition, a proxy that stops
    // forwarding) leaves its session idle in that transaction, holding the row locks of what it
    // wrote (a job's row), and the server, whose TCP peer may still acknowledge, keeps it for good:
    // another tunerd then could not take the job over (a takeover test saw none within 30 s). A
    // writer never pauses inside a transaction for long, so the server ends a session idle in one
    // for longer than this, and its locks go.
    auto idle = std::max<std::chrono::milliseconds>(std::chrono::seconds(10), 3 * reply_timeout);
    setup += fmt::format("; SET idle_in_transaction_session_timeout = {}", idle.count());
  }
  std::unique_ptr<PostgresConnection> connection(new PostgresConnection(conn, url, setup));
  connection->reply_timeout_ = reply_timeout;
  if (!conn || PQstatus(conn) != CONNECTION_OK) return connection->error(nullptr, "connecting");
  TF_RETURN_IF_ERROR(connection->exec(setup));
  return std::unique_ptr<Connection>(std::move(connection));
}

PostgresConnection::PostgresConnection(pg_conn* conn, std::string url, std::string setup)
    : Connection(std::move(url)), conn_(conn), setup_(std::move(setup)) {
  if (conn_) PQsetNoticeProcessor(conn_, quiet_notices, nullptr);
}

PostgresConnection::~PostgresConnection() { PQfinish(conn_); }

Status PostgresConnection::ready_for(std::string_view sql) {
  if (streaming_) streaming_->buffer_rest();
  if (PQstatus(conn_) == CONNECTION_OK) return Status();
  // The server rolled back whatever the lost connection had begun.
  if (in_transaction_ && !ends_transaction(sql) && !starts_transaction(sql))
    return unavailable(fmt::format("the connection to the PostgreSQL history {} broke inside a transaction", path()));
  in_transaction_ = false;
  prepared_.clear();
  PQreset(conn_);
  if (PQstatus(conn_) != CONNECTION_OK) return error(nullptr, "connecting again");
  PGresult* result = run(setup_);
  bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
  Status status = ok ? Status() : error(result, "setting up the session");
  PQclear(result);
  if (ok) spdlog::info("connected to the PostgreSQL history {} again", path());
  return status;
}

Status PostgresConnection::exec(std::string_view sql) {
  if (ends_transaction(sql) && PQstatus(conn_) != CONNECTION_OK && in_transaction_) {
    in_transaction_ = false;  // Nothing to roll back: the server did.
    return sql.starts_with("ROLLBACK") ? Status() : error(nullptr, "committing");
  }
  TF_RETURN_IF_ERROR(ready_for(sql));
  PGresult* result = run(std::string(sql));
  ExecStatusType status = PQresultStatus(result);
  Status answer;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
    if (const char* tuples = PQcmdTuples(result); *tuples) changes_ = std::strtoll(tuples, nullptr, 10);
  } else {
    answer = error(result, "running a statement");
  }
  PQclear(result);
  track_transaction();
  return answer;
}

StatusOr<Statement> PostgresConnection::prepare(std::string_view sql) {
  return Statement(std::make_unique<PostgresStatement>(this, postgres_parameters(sql)));
}

StatusOr<std::string> PostgresConnection::prepared(const std::string& sql, const std::string& types_key, int n,
                                                   const unsigned* types) {
  std::string key = sql + '\0' + types_key;
  if (auto it = prepared_.find(key); it != prepared_.end()) return it->second;
  std::string name = fmt::format("tf{}", prepared_.size() + 1);
  PGresult* result = PQsendPrepare(conn_, name.c_str(), sql.c_str(), n, types) ? last_result() : nullptr;
  bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
  Status status = ok ? Status() : error(result, "preparing a query");
  PQclear(result);
  track_transaction();
  TF_RETURN_IF_ERROR(status);
  prepared_.emplace(std::move(key), name);
  return name;
}

PGresult* PostgresConnection::next_result() {
  // libpq would block in PQgetResult for as long as the server stays silent: a server that hangs,
  // or a network that swallows everything while the kernel still acknowledges (keepalives then
  // pass), would hold the caller, and a tunerd's shutdown behind it, for good.
  while (PQisBusy(conn_)) {
    pollfd fd{PQsocket(conn_), POLLIN, 0};
    int ready = ::poll(&fd, 1, static_cast<int>(reply_timeout_.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      spdlog::warn("the PostgreSQL history {} sent nothing for {:.1f} s: taking the connection for broken", path(),
                   reply_timeout_.count() / 1000.0);
      // libpq then reads the end of the stream, fails the command and marks the connection bad;
      // the next transaction connects again.
      ::shutdown(PQsocket(conn_), SHUT_RDWR);
    }
    if (!PQconsumeInput(conn_)) break;
  }
  return PQgetResult(conn_);
}

PGresult* PostgresConnection::last_result() {
  PGresult* last = nullptr;
  while (PGresult* result = next_result()) {
    // As PQexec answers: the last result, or the first error.
    if (last && PQresultStatus(last) == PGRES_FATAL_ERROR) {
      PQclear(result);
      continue;
    }
    PQclear(last);
    last = result;
  }
  return last;
}

PGresult* PostgresConnection::run(const std::string& sql) {
  return PQsendQuery(conn_, sql.c_str()) ? last_result() : nullptr;
}

void PostgresConnection::track_transaction() {
  PGTransactionStatusType status = PQtransactionStatus(conn_);
  if (status == PQTRANS_IDLE) in_transaction_ = false;
  else if (status == PQTRANS_INTRANS || status == PQTRANS_INERROR) in_transaction_ = true;
  // PQTRANS_UNKNOWN (the connection broke): what was known before stands.
}

Status PostgresConnection::error(const pg_result* result, std::string_view what) {
  const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  std::string code = state ? state : "";
  std::string detail = result ? PQresultErrorMessage(result) : "";
  if (detail.empty() && conn_) detail = PQerrorMessage(conn_);
  while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' ')) detail.pop_back();
  std::string_view klass = std::string_view(code).substr(0, 2);
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK || code.empty() || klass == "08" || code == "57P01" ||
      code == "57P02" || code == "57P03")
    return unavailable(fmt::format("cannot reach the PostgreSQL history {} ({}): {}", path(), what, detail));
  // Serialization failures, deadlocks and lock timeouts: another tunerd's transaction was in the way.
  if (code == "40001" || code == "40P01" || code == "55P03")
    return Status(StatusCode::kAborted, fmt::format("history database {} is busy ({})", path(), what));
  if (code == "23505") return Status(StatusCode::kAlreadyExists, fmt::format("{} in {}: {}", what, path(), detail));
  if (code == "53100")
    return resource_exhausted(fmt::format("the PostgreSQL server of history {} is out of disk space: {}", path(), detail));
  if (klass == "53") return unavailable(fmt::format("the PostgreSQL server of history {} is short of resources: {}", path(), detail));
  if (klass == "28" || code == "42501" || code == "25006")
    return Status(StatusCode::kPermissionDenied,
                  fmt::format("the PostgreSQL history {} refuses this ({}): {}; check the role's rights", path(), what, detail));
  if (code == "XX001" || code == "XX002")
    return Status(StatusCode::kDataLoss, fmt::format("the PostgreSQL history {} is damaged: {}", path(), detail));
  return internal_error(fmt::format("{} in the PostgreSQL history {}: {} (SQLSTATE {})", what, path(), detail, code));
}

}  // namespace tunefarm::db
