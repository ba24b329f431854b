#include "db/copy_history.h"

#include <vector>

namespace tunefarm::db {
namespace {

constexpr size_t kBatch = 5000;
// list_jobs() holds them in memory: a history of more jobs than this is refused rather than cut.
constexpr int kMaxJobs = 10'000'000;

}  // namespace

StatusOr<CopyReport> copy_history(RecordStore& from, RecordStore& to) {
  CopyReport report;
  // Jobs first: a tunerd of the new history that sees a job finds its records with it.
  TF_ASSIGN_OR_RETURN(std::vector<v1::Job> jobs, from.list_jobs({}, kMaxJobs));
  // With their request ids: a client that resubmits after the move gets the job it made before.
  TF_ASSIGN_OR_RETURN(auto requests, from.job_requests());
  for (const v1::Job& job : jobs) {
    auto request = requests.find(job.id());
    TF_ASSIGN_OR_RETURN(bool stored, to.put_job(job, request == requests.end() ? JobRequest{} : request->second));
    ++(stored ? report.jobs : report.jobs_skipped);
  }
  std::vector<v1::Record> batch;
  auto store = [&]() -> Status {
    TF_ASSIGN_OR_RETURN(int64_t inserted, to.insert(batch));
    report.records += inserted;
    report.records_skipped += static_cast<int64_t>(batch.size()) - inserted;
    batch.clear();
    return Status();
  };
  TF_RETURN_IF_ERROR(from.export_records({}, [&](const v1::Record& record) -> Status {
    batch.push_back(record);
    return batch.size() >= kBatch ? store() : Status();
  }));
  if (!batch.empty()) TF_RETURN_IF_ERROR(store());
  return report;
}

}  // namespace tunefarm::db
