#include "db/salvage.h"

#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "db/queries.h"
#include "db/record_store.h"
#include "db/sqlite.h"

namespace tunefarm::db {
namespace {

constexpr size_t kBatch = 1000;
// A record row takes more than this many bytes of the file: an upper bound of the ids to try when
// the table's own b-tree cannot say which is the last.
constexpr int64_t kMinRowBytes = 64;

}  // namespace

StatusOr<SalvageReport> salvage_history(const std::string& damaged, const std::string& out) {
  std::error_code ec;
  if (std::filesystem::exists(out, ec))
    return failed_precondition(fmt::format("{} exists; salvage writes a new history: give an empty data directory", out));
  auto size = std::filesystem::file_size(damaged, ec);
  if (ec) return not_found(fmt::format("cannot read {}: {}", damaged, ec.message()));
  TF_ASSIGN_OR_RETURN(auto source, Connection::open(damaged, Connection::Mode::kReadOnly, std::chrono::seconds(1)));
  // Rows are read one id at a time, so that a damaged page costs the rows on it and no more.
  auto select = source->prepare(std::string(kSelectRecord) + "WHERE r.id = ?1");
  if (!select.ok())
    return select.status().with_context(fmt::format("{} has no records table this tunefarm can read", damaged));
  int64_t last = 0;
  if (auto max = source->prepare("SELECT max(id) FROM records"); max.ok()) {
    auto row = max->step();
    if (row.ok() && *row) last = max->column_int(0);
  }
  last = std::max(last, static_cast<int64_t>(size) / kMinRowBytes);

  TF_ASSIGN_OR_RETURN(auto store, RecordStore::open(out));
  SalvageReport report;
  std::vector<v1::Record> batch;
  auto flush = [&]() -> Status {
    TF_RETURN_IF_ERROR(store->add(batch));
    report.records += static_cast<int64_t>(batch.size());
    batch.clear();
    return Status();
  };
  for (int64_t id = 1; id <= last; ++id) {
    select->reset();
    select->bind(1, id);
    auto row = select->step();
    if (!row.ok()) {
      ++report.unreadable;
      continue;
    }
    if (!*row) continue;
    auto record = read_record(*select);
    if (!record.ok()) {
      ++report.unreadable;
      continue;
    }
    batch.push_back(std::move(*record));
    if (batch.size() == kBatch) TF_RETURN_IF_ERROR(flush());
  }
  TF_RETURN_IF_ERROR(flush());
  TF_RETURN_IF_ERROR(store->flush());
  return report;
}

}  // namespace tunefarm::db
