#include "db/salvage.h"

#include <filesystem>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "db/queries.h"
#include "db/record_store.h"
#include "db/sqlite.h"

namespace tunefarm::db {
namespace {

constexpr size_t kBatch = 1000;
// A row takes more than this many bytes of the file: an upper bound of the ids to try when a
// table's own b-tree cannot say which is the last.
constexpr int64_t kMinRowBytes = 64;

// Reads the rows of `table` one rowid at a time with `select` (which takes the rowid as ?1), so
// that a damaged page costs the rows on it and no more; `take` gets each row that SQLite could
// read and says whether it parsed. Counts the rest in `unreadable`.
Status for_each_row(Connection& source, int64_t file_size, std::string_view table, const std::string& select_sql,
                    const std::function<Status(const Statement&, bool& parsed)>& take, int64_t& unreadable) {
  auto select = source.prepare(select_sql);
  if (!select.ok())
    return select.status().with_context(fmt::format("{} has no {} table this tunefarm can read", source.path(), table));
  int64_t last = 0;
  if (auto max = source.prepare(fmt::format("SELECT max(rowid) FROM {}", table)); max.ok()) {
    auto row = max->step();
    if (row.ok() && *row) last = max->column_int(0);
  }
  last = std::max(last, file_size / kMinRowBytes);
  for (int64_t id = 1; id <= last; ++id) {
    select->reset();
    select->bind(1, id);
    auto row = select->step();
    if (!row.ok()) {
      ++unreadable;
      continue;
    }
    if (!*row) continue;
    bool parsed = true;
    TF_RETURN_IF_ERROR(take(*select, parsed));
    if (!parsed) ++unreadable;
  }
  return Status();
}

}  // namespace

StatusOr<SalvageReport> salvage_history(const std::string& damaged, const std::string& out) {
  std::error_code ec;
  if (std::filesystem::exists(out, ec))
    return failed_precondition(fmt::format("{} exists; salvage writes a new history: give an empty data directory", out));
  auto size = std::filesystem::file_size(damaged, ec);
  if (ec) return not_found(fmt::format("cannot read {}: {}", damaged, ec.message()));
  TF_ASSIGN_OR_RETURN(auto source, Connection::open(damaged, Connection::Mode::kReadOnly, std::chrono::seconds(1)));
  const auto file_size = static_cast<int64_t>(size);
  SalvageReport report;

  // Each job with the request it was submitted under, where the history keeps requests: a client
  // that retries its submit against the new history then finds its job instead of making another.
  std::vector<std::pair<v1::Job, JobRequest>> jobs;
  auto requests = source->prepare("SELECT submitter, request_id FROM jobs WHERE id = ?1");
  TF_RETURN_IF_ERROR(for_each_row(
      *source, file_size, "jobs", std::string(kSelectJob) + "WHERE rowid = ?1",
      [&](const Statement& row, bool& parsed) {
        auto job = read_job(row);
        parsed = job.ok();
        if (!parsed) return Status();
        JobRequest request;
        if (requests.ok()) {
          requests->reset();
          requests->bind(1, job->id());
          if (auto found = requests->step(); found.ok() && *found)
            request = {std::string(requests->column_text(0)), std::string(requests->column_text(1))};
        }
        jobs.emplace_back(std::move(*job), std::move(request));
        return Status();
      },
      report.unreadable));

  TF_ASSIGN_OR_RETURN(auto store, RecordStore::open(out));
  std::vector<v1::Record> batch;
  auto flush = [&]() -> Status {
    TF_RETURN_IF_ERROR(store->add(batch));
    report.records += static_cast<int64_t>(batch.size());
    batch.clear();
    return Status();
  };
  TF_RETURN_IF_ERROR(for_each_row(
      *source, file_size, "records", std::string(kSelectRecord) + "WHERE r.id = ?1",
      [&](const Statement& row, bool& parsed) -> Status {
        auto record = read_record(row);
        parsed = record.ok();
        if (!parsed) return Status();
        batch.push_back(std::move(*record));
        return batch.size() == kBatch ? flush() : Status();
      },
      report.unreadable));
  TF_RETURN_IF_ERROR(flush());
  // Jobs keep their ids, specs, states, progress and times, so that tunerd on the new history lists
  // them and resumes the ones that were queued or running; a job whose spec no longer passes the
  // checks is as unreadable as a row that did not parse.
  for (const auto& [job, request] : jobs) {
    auto stored = store->put_job(job, request);
    if (stored.ok())
      report.jobs += *stored ? 1 : 0;
    else
      ++report.unreadable;
  }
  TF_RETURN_IF_ERROR(store->flush());
  return report;
}

}  // namespace tunefarm::db
