#include "db/record_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <istream>
#include <ostream>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <spdlog/spdlog.h>

#include "common/figure.h"
#include "common/wire/wire.h"
#include "db/lease_fences.h"
#include "db/queries.h"
#include "db/record_codec.h"
#include "db/schema.h"
#include "db/sqlite.h"
#include "db/writer.h"

namespace tunefarm::db {
namespace {

// One SQLite call waits this long for a lock; retry_while_busy() covers the rest of the budget.
constexpr std::chrono::milliseconds kCallBusyTimeout{1000};
// Records per writer operation when importing.
constexpr size_t kImportBatch = 5000;
constexpr int64_t kDefaultListLimit = 1000;
// Answers are built in memory: larger listings go through export, which streams.
constexpr int64_t kMaxListLimit = 100000;
constexpr int kMaxTopK = 1000;
constexpr size_t kMaxIdleReaders = 8;
// Page caches; negative sizes are KiB. No memory map: a file cut short under a map would kill the
// process with SIGBUS, where reads through the page cache fail with an error.
constexpr std::string_view kWriterCache =
    "PRAGMA cache_size = -65536; PRAGMA wal_autocheckpoint = 16384; PRAGMA journal_size_limit = 67108864";
constexpr std::string_view kReaderCache = "PRAGMA cache_size = -16384";

}  // namespace

StatusOr<v1::Record> read_record(const Statement& stmt) {
  RecordRow row;
  row.workload = stmt.column_text(1);
  row.target = stmt.column_text(2);
  row.device_key = stmt.column_text(3);
  row.config = stmt.column_text(4);
  row.config_index = stmt.column_int(5);
  row.costs = stmt.column_text(6);
  row.mean_cost_s = stmt.column_double(7);
  row.gflops = stmt.column_double(8);
  row.error_code = static_cast<int>(stmt.column_int(9));
  row.error_msg = stmt.column_text(10);
  row.build_time_s = stmt.column_double(11);
  row.started_at_us = stmt.column_int(12);
  row.finished_at_us = stmt.column_int(13);
  row.job_id = stmt.column_text(14);
  row.agent_id = stmt.column_text(15);
  row.attempts = stmt.column_int(16);
  row.remeasure_round = stmt.column_int(17);
  row.built_for = stmt.column_text(18);
  return from_row(row, stmt.column_int(0));
}

namespace {

// The WHERE clause of a record filter, with its parameters in order.
struct FilterSql {
  std::string where;
  std::vector<std::string> params;
};

FilterSql filter_sql(const RecordFilter& filter) {
  FilterSql out;
  auto add = [&](std::string_view condition, std::string param) {
    out.where += out.params.empty() ? "WHERE " : " AND ";
    out.where += condition;
    out.params.push_back(std::move(param));
  };
  if (filter.workload) add("r.workload_id = (SELECT id FROM workloads WHERE text = ?)", filter.workload->to_string());
  if (filter.target) add("r.target_id = (SELECT id FROM targets WHERE text = ?)", filter.target->to_string());
  if (!filter.device_key.empty()) add("r.device_key = ?", filter.device_key);
  if (!filter.job_id.empty()) add("r.job_id = ?", filter.job_id);
  out.where += ' ';
  return out;
}

StatusOr<std::vector<RecordRow>> to_rows(const std::vector<v1::Record>& records) {
  std::vector<RecordRow> rows;
  rows.reserve(records.size());
  RowEncoder encoder;
  for (size_t i = 0; i < records.size(); ++i) {
    auto row = encoder.to_row(records[i]);
    if (!row.ok()) return row.status().with_context(fmt::format("record {} of {}", i + 1, records.size()));
    rows.push_back(std::move(row).value());
  }
  return rows;
}

StatusOr<int64_t> intern(Connection& connection, std::string_view table, const std::string& text,
                         std::unordered_map<std::string, int64_t>& ids) {
  if (auto it = ids.find(text); it != ids.end()) return it->second;
  // Another tunerd sharing the history may add the same text meanwhile: the insert then does
  // nothing (after waiting for the other's transaction), and the second look finds its row.
  // Each statement answers the text's id in its first column when it has a row.
  auto id_from = [&](const std::string& sql) -> StatusOr<std::optional<int64_t>> {
    TF_ASSIGN_OR_RETURN(Statement statement, connection.prepare(fmt::format(fmt::runtime(sql), table)));
    statement.bind(1, text);
    TF_ASSIGN_OR_RETURN(bool found, statement.step());
    if (!found) return std::optional<int64_t>();
    int64_t id = statement.column_int(0);
    ids.emplace(text, id);
    return std::optional<int64_t>(id);
  };
  const std::string look = "SELECT id FROM {} WHERE text = ?1";
  for (const std::string& sql : {look, std::string("INSERT INTO {} (text) VALUES (?1) ON CONFLICT DO NOTHING RETURNING id"), look}) {
    TF_ASSIGN_OR_RETURN(std::optional<int64_t> id, id_from(sql));
    if (id) return *id;
  }
  return internal_error(fmt::format("'{}' is neither in table {} nor could it be added", text, table));
}

constexpr size_t kRecordColumns = 18;
// Rows per INSERT on PostgreSQL: 18 x 100 parameters, far below its limit of 65535.
constexpr size_t kRowsPerPostgresInsert = 100;

// The INSERT of `count` records (kRecordColumns parameters each, in the order of its columns);
// a record already present is skipped.
std::string insert_records_sql(size_t count) {
  std::string sql =
      "INSERT INTO records (workload_id, target_id, device_key, config, config_index, costs, mean_cost_s, gflops, "
      "error_code, error_msg, build_time_s, started_at_us, finished_at_us, job_id, agent_id, attempts, "
      "remeasure_round, built_for) VALUES ";
  for (size_t i = 0; i < count; ++i) {
    sql += i == 0 ? "(" : ", (";
    for (size_t c = 1; c <= kRecordColumns; ++c) sql += fmt::format("{}?{}", c == 1 ? "" : ", ", i * kRecordColumns + c);
    sql += ')';
  }
  return sql + " ON CONFLICT DO NOTHING";
}

// The writer operation that stores `rows`; answers how many were new. Rows of a job whose lease
// this store held and lost are refused, all of them (`fences` may be null).
Writer::Operation insert_operation(std::shared_ptr<const std::vector<RecordRow>> rows,
                                   std::shared_ptr<const LeaseFences> fences) {
  return [rows, fences](Connection& connection) -> StatusOr<int64_t> {
    if (fences) {
      std::set<std::string_view> jobs;
      for (const RecordRow& row : *rows) jobs.insert(row.job_id);
      for (std::string_view job : jobs) TF_RETURN_IF_ERROR(check_fence(connection, fences.get(), job));
    }
    std::unordered_map<std::string, int64_t> workload_ids;
    std::unordered_map<std::string, int64_t> target_ids;
    int64_t inserted = 0;
    // SQLite inserts a row per statement in-process; PostgreSQL takes many rows per statement, one
    // round trip for all of them.
    const size_t per_statement = connection.dialect() == Dialect::kPostgres ? kRowsPerPostgresInsert : 1;
    for (size_t first = 0; first < rows->size(); first += per_statement) {
      size_t count = std::min(per_statement, rows->size() - first);
      TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare(insert_records_sql(count)));
      for (size_t i = 0; i < count; ++i) {
        const RecordRow& row = (*rows)[first + i];
        TF_ASSIGN_OR_RETURN(int64_t workload_id, intern(connection, "workloads", row.workload, workload_ids));
        TF_ASSIGN_OR_RETURN(int64_t target_id, intern(connection, "targets", row.target, target_ids));
        int at = static_cast<int>(i * kRecordColumns);
        stmt.bind(at + 1, workload_id);
        stmt.bind(at + 2, target_id);
        stmt.bind(at + 3, row.device_key);
        stmt.bind(at + 4, row.config);
        stmt.bind(at + 5, row.config_index);
        stmt.bind(at + 6, row.costs);
        stmt.bind(at + 7, row.mean_cost_s);
        stmt.bind(at + 8, row.gflops);
        stmt.bind(at + 9, int64_t{row.error_code});
        stmt.bind(at + 10, row.error_msg);
        stmt.bind(at + 11, row.build_time_s);
        stmt.bind(at + 12, row.started_at_us);
        stmt.bind(at + 13, row.finished_at_us);
        stmt.bind(at + 14, row.job_id);
        stmt.bind(at + 15, row.agent_id);
        stmt.bind(at + 16, row.attempts);
        stmt.bind(at + 17, row.remeasure_round);
        stmt.bind(at + 18, row.built_for);
      }
      TF_RETURN_IF_ERROR(stmt.run());
      inserted += connection.changes();
    }
    return inserted;
  };
}

// SQLite reads a truncated file without complaint until it reaches a missing page. The header
// says how long the file should be, so a cut-off file is caught when it is opened.
Status check_file_header(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || info.st_size == 0) return Status();
  auto damaged = [&](std::string_view why) {
    return Status(StatusCode::kDataLoss, fmt::format("history database {} {}; restore it from an export or move "
                                                     "it aside, or copy what it still holds into a new "
                                                     "history with tunerd --salvage FILE --data-dir NEW_DIR",
                                                     path, why));
  };
  std::array<unsigned char, 100> header{};
  std::ifstream file(path, std::ios::binary);
  if (!file.read(reinterpret_cast<char*>(header.data()), header.size())) {
    return damaged(fmt::format("is truncated or not a database ({} bytes)", info.st_size));
  }
  if (std::memcmp(header.data(), "SQLite format 3", 16) != 0) return damaged("is not a SQLite database");
  auto be32 = [&](int at) {
    return (uint32_t{header[at]} << 24) | (uint32_t{header[at + 1]} << 16) | (uint32_t{header[at + 2]} << 8) |
           uint32_t{header[at + 3]};
  };
  uint32_t page_size = (uint32_t{header[16]} << 8) | header[17];
  if (page_size == 1) page_size = 65536;
  // The page count is only meaningful when the change counter matches "version valid for".
  bool count_valid = be32(24) == be32(92);
  struct stat wal;
  bool wal_has_frames = ::stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0;
  int64_t expected = int64_t{be32(28)} * page_size;
  if (count_valid && !wal_has_frames && expected > info.st_size) {
    return damaged(fmt::format("is truncated: its header describes {} bytes but the file has {}", expected,
                               info.st_size));
  }
  return Status();
}

// A file damaged inside (scribbled pages) opens and even answers some reads; it must be refused
// before a job spends device time on measurements that could not be stored.
Status check_pages(Connection& connection, const std::string& path, RecordStoreOptions::Check check) {
  const char* pragma = check == RecordStoreOptions::Check::kFull ? "PRAGMA integrity_check(5)" : "PRAGMA quick_check(5)";
  auto damaged = [&](std::string_view why) {
    return Status(StatusCode::kDataLoss, fmt::format("history database {} is damaged ({}); restore it from an "
                                                     "export, move it aside, or copy what it still holds into a new "
                                                     "history with tunerd --salvage FILE --data-dir NEW_DIR",
                                                     path, why));
  };
  auto stmt = connection.prepare(pragma);
  if (!stmt.ok()) return damaged(stmt.status().message());
  std::string problems;
  while (true) {
    auto row = stmt->step();
    if (!row.ok()) return damaged(row.status().message());
    if (!*row) break;
    std::string_view line = stmt->column_text(0);
    if (line == "ok") continue;
    problems += (problems.empty() ? "" : "; ") + std::string(line);
  }
  return problems.empty() ? Status() : damaged(problems);
}

// A message's size as an element of a repeated field: its tag (one byte for field numbers below
// 16), its length and its bytes.
size_t repeated_field_bytes(const google::protobuf::Message& message) {
  size_t size = message.ByteSizeLong();
  return 1 + google::protobuf::io::CodedOutputStream::VarintSize64(size) + size;
}

Status check_limits(int64_t limit, int64_t offset) {
  if (limit < 0) return invalid_argument(fmt::format("limit {} is negative", limit));
  if (limit > kMaxListLimit) {
    return invalid_argument(fmt::format("limit {} is above {}; export the records to read more at once", limit,
                                        kMaxListLimit));
  }
  if (offset < 0) return invalid_argument(fmt::format("offset {} is negative", offset));
  return Status();
}

}  // namespace

RecordStore::RecordStore(std::string path, RecordStoreOptions options, std::unique_ptr<Writer> writer)
    : path_(std::move(path)), options_(options), writer_(std::move(writer)) {}

RecordStore::~RecordStore() = default;

StatusOr<std::unique_ptr<RecordStore>> RecordStore::open(const std::string& path, RecordStoreOptions options) {
  auto busy_timeout = std::min(options.busy_budget, kCallBusyTimeout);
  if (is_postgres_url(path)) {
    TF_ASSIGN_OR_RETURN(auto connection, Connection::open(path, Connection::Mode::kReadWrite, busy_timeout, options.reply_timeout));
    TF_RETURN_IF_ERROR(
        retry_while_busy([&] { return migrate(*connection, postgres_migrations()); }, options.busy_budget, path));
    auto writer = std::make_unique<Writer>(std::move(connection), options.busy_budget, 50000, options.on_commit);
    std::unique_ptr<RecordStore> store(new RecordStore(path, options, std::move(writer)));
    store->fences_ = std::make_shared<LeaseFences>();
    return store;
  }
  TF_RETURN_IF_ERROR(check_file_header(path));
  TF_ASSIGN_OR_RETURN(auto connection, Connection::open(path, Connection::Mode::kReadWrite, busy_timeout, options.reply_timeout));
  TF_RETURN_IF_ERROR(check_pages(*connection, path, options.check));
  Status status = retry_while_busy(
      [&]() -> Status {
        {
          TF_ASSIGN_OR_RETURN(Statement stmt, connection->prepare("PRAGMA journal_mode = WAL"));
          TF_ASSIGN_OR_RETURN(bool row, stmt.step());
          if (!row || stmt.column_text(0) != "wal") {
            return unavailable(fmt::format("history database {} cannot use write-ahead logging (journal mode "
                                           "'{}'); put the data directory on a local file system",
                                           path, row ? stmt.column_text(0) : ""));
          }
        }
        // Committed transactions survive a crash of the process; only a power cut can lose the
        // last few, which is the right trade for measurements that can be taken again.
        TF_RETURN_IF_ERROR(connection->exec("PRAGMA synchronous = NORMAL"));
        // Index pages of a large history are touched at random by inserts: a page cache that
        // holds them keeps inserts from re-reading the file, and checkpointing less often writes
        // each hot page back once for many transactions.
        TF_RETURN_IF_ERROR(connection->exec(kWriterCache));
        return migrate(*connection, migrations());
      },
      options.busy_budget, path);
  TF_RETURN_IF_ERROR(status);
  auto writer = std::make_unique<Writer>(std::move(connection), options.busy_budget, 50000, options.on_commit);
  return std::unique_ptr<RecordStore>(new RecordStore(path, options, std::move(writer)));
}

Status RecordStore::with_reader(const std::function<Status(Connection&)>& read, Reads reads) {
  std::unique_ptr<Connection> connection;
  {
    std::lock_guard lock(readers_mutex_);
    if (!idle_readers_.empty()) {
      connection = std::move(idle_readers_.back());
      idle_readers_.pop_back();
    }
  }
  if (!connection) {
    auto opened = Connection::open(path_, Connection::Mode::kReadOnly, std::min(options_.busy_budget, kCallBusyTimeout),
                                   options_.reply_timeout);
    if (!opened.ok()) return opened.status();
    connection = std::move(opened).value();
    if (connection->dialect() == Dialect::kSqlite) {
      if (Status s = connection->exec(kReaderCache); !s.ok()) return s;
    }
  }
  // One read transaction: every statement of `read` sees the same snapshot (in PostgreSQL's
  // default isolation each statement would see its own).
  bool postgres = connection->dialect() == Dialect::kPostgres;
  std::string_view begin = postgres ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" : "BEGIN";
  Status status = retry_while_busy(
      [&]() -> Status {
        if (postgres && reads == Reads::kOneStatement) return read(*connection);
        TF_RETURN_IF_ERROR(connection->exec(begin));
        Status s = read(*connection);
        if (s.ok()) s = connection->exec("COMMIT");
        if (!s.ok()) (void)connection->exec("ROLLBACK");
        return s;
      },
      options_.busy_budget, path_);
  std::lock_guard lock(readers_mutex_);
  if (idle_readers_.size() < kMaxIdleReaders) idle_readers_.push_back(std::move(connection));
  return status;
}

Status RecordStore::add(const std::vector<v1::Record>& records) {
  TF_ASSIGN_OR_RETURN(auto rows, to_rows(records));
  if (rows.empty()) return Status();
  auto weight = static_cast<int64_t>(rows.size());
  writer_->submit_detached(insert_operation(std::make_shared<const std::vector<RecordRow>>(std::move(rows)), fences_), weight);
  return Status();
}

Status RecordStore::flush() { return writer_->flush(); }

Status RecordStore::write_outage() const { return writer_->outage(); }

StatusOr<int64_t> RecordStore::insert(const std::vector<v1::Record>& records) {
  TF_ASSIGN_OR_RETURN(auto rows, to_rows(records));
  if (rows.empty()) return int64_t{0};
  auto weight = static_cast<int64_t>(rows.size());
  return writer_->submit(insert_operation(std::make_shared<const std::vector<RecordRow>>(std::move(rows)), fences_), weight)
      .get();
}

StatusOr<std::vector<v1::Record>> RecordStore::query_best(const Workload& workload, const Target& target,
                                                          std::string_view device_key, int top_k) {
  if (top_k < 0 || top_k > kMaxTopK) {
    return invalid_argument(fmt::format("top_k {} is outside 0..{}", top_k, kMaxTopK));
  }
  if (top_k == 0) top_k = 1;
  // A config's figure comes from all its measurements (common/figure.h), and is never faster than
  // its fastest one: the candidates are the configs of the fastest measurements. A config whose
  // fastest measurement is not among them is slower than enough others to stay out of the top k.
  const int64_t candidates = std::min<int64_t>(int64_t{kMaxTopK} * 4, std::max(64, 16 * top_k));
  std::string best_sql = best_query_sql(!device_key.empty());
  std::string config_sql = config_measurements_sql();
  std::string workload_text = workload.to_string();
  std::string target_text = target.to_string();
  struct Figure {
    double cost;
    int64_t id;
    v1::Record record;
  };
  std::vector<Figure> figures;
  // One config's successful measurements, fastest first, become its figure's record.
  auto add_figure = [&](std::vector<Figure>& measured) {
    std::vector<double> costs;
    for (const Figure& m : measured) costs.push_back(m.cost);
    double figure = figure_cost(costs);
    auto it = std::find_if(measured.begin(), measured.end(), [&](const Figure& m) { return m.cost == figure; });
    if (it != measured.end()) figures.push_back(std::move(*it));
  };
  // A measurement of a row; nothing for a damaged row, which says so in listings while a best
  // answer comes from the intact ones.
  auto read_measurement = [](const Statement& stmt) -> StatusOr<std::optional<Figure>> {
    auto record = read_record(stmt);
    if (!record.ok() && record.status().code() == StatusCode::kDataLoss) {
      spdlog::warn("best configs: leaving out {}", record.status().message());
      return std::optional<Figure>();
    }
    TF_RETURN_IF_ERROR(record.status());
    return std::optional<Figure>(Figure{record->mean_cost_s(), stmt.column_int(0), std::move(record).value()});
  };
  TF_RETURN_IF_ERROR(with_reader([&](Connection& connection) -> Status {
    figures.clear();
    if (connection.dialect() == Dialect::kPostgres) {
      // One round trip, and a row per figure: over a network, a query per candidate config would cost
      // a round trip each, and reading every measurement of every candidate here cost as much CPU
      // as the server's whole answer (about 80 rows for a top 1, each a record to parse).
      TF_ASSIGN_OR_RETURN(Statement stmt,
                          connection.prepare(best_figures_sql(!device_key.empty(), figures_candidates(candidates))));
      stmt.bind(1, workload_text);
      stmt.bind(2, target_text);
      stmt.bind(3, candidates);  // Unused (it is in the SQL), but typed, so that ?4 and ?5 have places after it.
      stmt.bind(4, device_key);
      stmt.bind(5, int64_t{top_k});
      for (;;) {
        TF_ASSIGN_OR_RETURN(bool row, stmt.step());
        if (!row) return Status();
        TF_ASSIGN_OR_RETURN(std::optional<Figure> figure, read_measurement(stmt));
        if (figure) figures.push_back(std::move(*figure));
      }
    }
    std::vector<std::pair<std::string, std::string>> configs;  // (device key, config), fastest first.
    std::set<std::pair<std::string, std::string>> seen;
    {
      TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare(best_sql));
      stmt.bind(1, workload_text);
      stmt.bind(2, target_text);
      stmt.bind(3, candidates);
      if (!device_key.empty()) stmt.bind(4, device_key);
      for (;;) {
        TF_ASSIGN_OR_RETURN(bool row, stmt.step());
        if (!row) break;
        std::pair<std::string, std::string> key(stmt.column_text(3), stmt.column_text(4));
        if (seen.insert(key).second) configs.push_back(std::move(key));
      }
    }
    TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare(config_sql));
    for (const auto& [key, config] : configs) {
      stmt.reset();
      stmt.bind(1, workload_text);
      stmt.bind(2, target_text);
      stmt.bind(3, config);
      stmt.bind(4, key);
      std::vector<Figure> measured;
      for (;;) {
        TF_ASSIGN_OR_RETURN(bool row, stmt.step());
        if (!row) break;
        TF_ASSIGN_OR_RETURN(std::optional<Figure> one, read_measurement(stmt));
        if (one) measured.push_back(std::move(*one));
      }
      add_figure(measured);
    }
    return Status();
  }, Reads::kOneStatement));
  std::sort(figures.begin(), figures.end(),
            [](const Figure& a, const Figure& b) { return a.cost != b.cost ? a.cost < b.cost : a.id < b.id; });
  std::vector<v1::Record> best;
  for (size_t i = 0; i < figures.size() && static_cast<int>(i) < top_k; ++i) best.push_back(std::move(figures[i].record));
  return best;
}

StatusOr<RecordPage> RecordStore::list_records(const RecordFilter& filter, int64_t limit, int64_t offset,
                                               size_t max_bytes) {
  TF_RETURN_IF_ERROR(check_limits(limit, offset));
  if (limit == 0) limit = kDefaultListLimit;
  FilterSql where = filter_sql(filter);
  RecordPage page;
  TF_RETURN_IF_ERROR(with_reader([&](Connection& connection) -> Status {
    page = RecordPage();
    TF_ASSIGN_OR_RETURN(Statement count, connection.prepare("SELECT count(*) FROM records r " + where.where));
    for (size_t i = 0; i < where.params.size(); ++i) count.bind(static_cast<int>(i + 1), where.params[i]);
    TF_ASSIGN_OR_RETURN(bool counted, count.step());
    page.total = counted ? count.column_int(0) : 0;

    int next = static_cast<int>(where.params.size()) + 1;
    TF_ASSIGN_OR_RETURN(Statement stmt,
                        connection.prepare(fmt::format("{}{}ORDER BY r.id LIMIT ?{} OFFSET ?{}", kSelectRecord,
                                                       where.where, next, next + 1)));
    for (size_t i = 0; i < where.params.size(); ++i) stmt.bind(static_cast<int>(i + 1), where.params[i]);
    stmt.bind(next, limit);
    stmt.bind(next + 1, offset);
    size_t bytes = 0;
    for (;;) {
      TF_ASSIGN_OR_RETURN(bool row, stmt.step());
      if (!row) return Status();
      TF_ASSIGN_OR_RETURN(v1::Record record, read_record(stmt));
      bytes += repeated_field_bytes(record);
      if (max_bytes > 0 && bytes > max_bytes && !page.records.empty()) {
        page.next_offset = offset + static_cast<int64_t>(page.records.size());
        return Status();
      }
      page.records.push_back(std::move(record));
    }
  }));
  return page;
}

StatusOr<std::vector<std::string>> RecordStore::measured_configs(std::string_view job_id, const Workload& workload) {
  std::string workload_text = workload.to_string();
  std::vector<std::string> configs;
  TF_RETURN_IF_ERROR(with_reader([&](Connection& connection) -> Status {
    configs.clear();
    TF_ASSIGN_OR_RETURN(Statement stmt,
                        connection.prepare("SELECT config FROM records WHERE job_id = ?1 AND workload_id = "
                                           "(SELECT id FROM workloads WHERE text = ?2) GROUP BY config "
                                           "ORDER BY min(id)"));
    stmt.bind(1, job_id);
    stmt.bind(2, workload_text);
    for (;;) {
      TF_ASSIGN_OR_RETURN(bool row, stmt.step());
      if (!row) return Status();
      configs.emplace_back(stmt.column_text(0));
    }
  }));
  return configs;
}

StatusOr<int64_t> RecordStore::count_measured_configs(std::string_view job_id) {
  int64_t count = 0;
  TF_RETURN_IF_ERROR(with_reader([&](Connection& connection) -> Status {
    TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare("SELECT count(*) FROM (SELECT DISTINCT workload_id, "
                                                           "config FROM records WHERE job_id = ?1) AS configs"));
    stmt.bind(1, job_id);
    TF_ASSIGN_OR_RETURN(bool row, stmt.step());
    count = row ? stmt.column_int(0) : 0;
    return Status();
  }));
  return count;
}

Status RecordStore::export_records(const RecordFilter& filter, const std::function<Status(const v1::Record&)>& sink) {
  FilterSql where = filter_sql(filter);
  bool started = false;
  return with_reader([&](Connection& connection) -> Status {
    // What went to the sink cannot be taken back, so a busy database after the first record is
    // an error rather than a retry.
    auto no_retry = [&](Status status) {
      if (started && status.code() == StatusCode::kAborted) return unavailable(status.message());
      return status;
    };
    auto stmt = connection.prepare(fmt::format("{}{}ORDER BY r.id", kSelectRecord, where.where));
    if (!stmt.ok()) return stmt.status();
    for (size_t i = 0; i < where.params.size(); ++i) stmt->bind(static_cast<int>(i + 1), where.params[i]);
    for (;;) {
      auto row = stmt->step();
      if (!row.ok()) return no_retry(row.status());
      if (!*row) return Status();
      TF_ASSIGN_OR_RETURN(v1::Record record, read_record(*stmt));
      started = true;
      TF_RETURN_IF_ERROR(sink(record));
    }
  });
}

Status RecordStore::export_jsonl(const RecordFilter& filter, std::ostream& out) {
  return export_records(filter, [&](const v1::Record& record) -> Status {
    out << record_to_json_line(record) << '\n';
    if (!out) return unavailable("writing the export failed (disk full or output closed)");
    return Status();
  });
}

StatusOr<ImportStats> RecordStore::import_jsonl(std::istream& in, std::string_view source,
                                                const std::function<Status(const v1::Record&)>& check) {
  const std::istream::pos_type start = in.tellg();
  if (start == std::istream::pos_type(-1)) {
    return invalid_argument(fmt::format("{}: import reads its input twice and needs a file, not a pipe", source));
  }
  auto for_each_line = [&](const std::function<Status(int64_t, std::string_view)>& visit) -> Status {
    std::string line;
    for (int64_t number = 1; std::getline(in, line); ++number) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      TF_RETURN_IF_ERROR(visit(number, line));
    }
    if (in.bad()) return unavailable(fmt::format("{}: reading failed after some lines", source));
    return Status();
  };
  RowEncoder encoder;
  auto parse = [&](int64_t number, std::string_view line) -> StatusOr<RecordRow> {
    auto record = record_from_json_line(line);
    // The record's own limits first: they are cheap, and they bound what the check must read.
    auto row = record.ok() ? encoder.to_row(*record) : StatusOr<RecordRow>(record.status());
    if (row.ok() && check) {
      if (Status s = check(*record); !s.ok()) row = s;
    }
    if (!row.ok()) return row.status().with_context(fmt::format("{} line {}", source, number));
    return row;
  };

  // First pass: check every line, so that a bad file changes nothing.
  TF_RETURN_IF_ERROR(for_each_line([&](int64_t number, std::string_view line) { return parse(number, line).status(); }));
  in.clear();
  in.seekg(start);
  if (!in) return invalid_argument(fmt::format("{}: cannot go back to the start of the input", source));

  ImportStats stats;
  int64_t seen = 0;
  auto batch = std::make_shared<std::vector<RecordRow>>();
  auto store = [&]() -> Status {
    if (batch->empty()) return Status();
    auto weight = static_cast<int64_t>(batch->size());
    TF_ASSIGN_OR_RETURN(int64_t inserted, writer_->submit(insert_operation(std::move(batch), fences_), weight).get());
    stats.imported += inserted;
    batch = std::make_shared<std::vector<RecordRow>>();
    return Status();
  };
  TF_RETURN_IF_ERROR(for_each_line([&](int64_t number, std::string_view line) -> Status {
    TF_ASSIGN_OR_RETURN(RecordRow row, parse(number, line));
    batch->push_back(std::move(row));
    ++seen;
    return batch->size() >= kImportBatch ? store() : Status();
  }));
  TF_RETURN_IF_ERROR(store());
  stats.skipped = seen - stats.imported;
  return stats;
}

}  // namespace tunefarm::db
