// The leases half of RecordStore (record_store.h, "Leases"). Expiries are kept on the database
// server's clock, so the tunerds' clocks need not agree; each tunerd measures how long its own
// lease may still be valid from the moment it sent its last successful renewal (tuner/job_manager).
#include <fmt/format.h>

#include "db/lease_fences.h"
#include "db/record_store.h"
#include "db/writer.h"

namespace tunefarm::db {
namespace {

// An expiry `?N` milliseconds from now on the server's clock.
std::string expiry_in(int parameter) {
  return fmt::format("clock_timestamp() + ?{}::double precision * interval '1 millisecond'", parameter);
}

Status not_shared(std::string_view path) {
  return failed_precondition(fmt::format("history {} belongs to one tunerd: its jobs have no leases", path));
}

}  // namespace

Status check_fence(Connection& connection, const LeaseFences* fences, std::string_view job_id) {
  if (!fences) return Status();
  std::optional<int64_t> held = fences->generation(job_id);
  if (!held) return Status();
  // FOR SHARE: a takeover (an UPDATE of the row) waits until this write has committed.
  TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare("SELECT lease_generation FROM jobs WHERE id = ?1 FOR SHARE"));
  stmt.bind(1, job_id);
  TF_ASSIGN_OR_RETURN(bool found, stmt.step());
  int64_t now = found ? stmt.column_int(0) : -1;
  if (now == *held) return Status();
  return failed_precondition(fmt::format(
      "job {} is run by another tunerd now (its lease moved on from generation {} to {}); this tunerd's writes "
      "for it are refused",
      job_id, *held, now));
}

bool RecordStore::shared() const { return fences_ != nullptr; }

StatusOr<int64_t> RecordStore::build_crashes(std::string_view job_id) {
  if (!fences_) return not_shared(path_);
  int64_t crashes = 0;
  TF_RETURN_IF_ERROR(with_reader([&](Connection& connection) -> Status {
    TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare("SELECT build_crashes FROM jobs WHERE id = ?1"));
    stmt.bind(1, job_id);
    TF_ASSIGN_OR_RETURN(bool row, stmt.step());
    if (!row) return not_found(fmt::format("job {} does not exist", job_id));
    crashes = stmt.column_int(0);
    return Status();
  }, Reads::kOneStatement));
  return crashes;
}

Status RecordStore::set_build_crashes(std::string_view job_id, int64_t crashes) {
  if (!fences_) return not_shared(path_);
  return writer_->submit([&](Connection& connection) -> StatusOr<int64_t> {
    TF_RETURN_IF_ERROR(check_fence(connection, fences_.get(), job_id));
    TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare("UPDATE jobs SET build_crashes = ?2 WHERE id = ?1"));
    stmt.bind(1, job_id);
    stmt.bind(2, crashes);
    TF_RETURN_IF_ERROR(stmt.run());
    if (connection.changes() == 0) return not_found(fmt::format("job {} does not exist", job_id));
    return connection.changes();
  }).get().status();
}

StatusOr<std::optional<int64_t>> RecordStore::acquire_lease(std::string_view job_id, std::string_view owner,
                                                            std::chrono::milliseconds duration) {
  if (!fences_) return not_shared(path_);
  std::string id(job_id);
  std::string who(owner);
  std::optional<int64_t> generation;
  auto taken = writer_->submit([&](Connection& connection) -> StatusOr<int64_t> {
    generation.reset();
    TF_ASSIGN_OR_RETURN(Statement stmt,
                        connection.prepare(fmt::format(
                            "UPDATE jobs SET owner = ?2, lease_generation = lease_generation + 1, cancel_requested "
                            "= false, lease_expires_at = {} WHERE id = ?1 AND state IN (?4, ?5) AND (owner = '' OR "
                            "lease_expires_at < clock_timestamp()) RETURNING lease_generation",
                            expiry_in(3))));
    stmt.bind(1, id);
    stmt.bind(2, who);
    stmt.bind(3, static_cast<int64_t>(duration.count()));
    stmt.bind(4, int64_t{v1::QUEUED});
    stmt.bind(5, int64_t{v1::RUNNING});
    TF_ASSIGN_OR_RETURN(bool row, stmt.step());
    if (row) generation = stmt.column_int(0);
    return int64_t{row};
  }).get();
  TF_RETURN_IF_ERROR(taken.status());
  if (generation) {
    std::lock_guard lock(fences_->mutex);
    fences_->held[id] = *generation;
    fences_->released.erase(id);
  }
  return generation;
}

StatusOr<std::vector<LeaseRenewal>> RecordStore::renew_leases(std::string_view owner,
                                                              std::chrono::milliseconds duration) {
  if (!fences_) return not_shared(path_);
  std::map<std::string, int64_t> held;
  {
    std::lock_guard lock(fences_->mutex);
    held = fences_->held;
  }
  std::vector<LeaseRenewal> renewals;
  std::string who(owner);
  auto renewed = writer_->submit([&](Connection& connection) -> StatusOr<int64_t> {
    renewals.clear();
    TF_ASSIGN_OR_RETURN(Statement stmt,
                        connection.prepare(fmt::format("UPDATE jobs SET lease_expires_at = {} WHERE id = ?1 AND "
                                                       "owner = ?2 AND lease_generation = ?4 AND state IN (?5, ?6) "
                                                       "RETURNING cancel_requested",
                                                       expiry_in(3))));
    for (const auto& [id, generation] : held) {
      stmt.reset();
      stmt.bind(1, id);
      stmt.bind(2, who);
      stmt.bind(3, static_cast<int64_t>(duration.count()));
      stmt.bind(4, generation);
      stmt.bind(5, int64_t{v1::QUEUED});
      stmt.bind(6, int64_t{v1::RUNNING});
      TF_ASSIGN_OR_RETURN(bool row, stmt.step());
      renewals.push_back({id, row, row && stmt.column_int(0) != 0});
    }
    return static_cast<int64_t>(renewals.size());
  }).get();
  TF_RETURN_IF_ERROR(renewed.status());
  return renewals;
}

Status RecordStore::release_lease(std::string_view job_id) {
  if (!fences_) return not_shared(path_);
  std::optional<int64_t> generation = fences_->generation(job_id);
  forget_lease(job_id);
  if (!generation) return Status();
  // Releasing only spares the others the lease's wait; while the history cannot be written it would
  // cost this caller a try (a connect timeout), for a lease that expires by itself.
  if (Status outage = writer_->outage(); !outage.ok()) return outage;
  std::string id(job_id);
  return writer_->submit([&](Connection& connection) -> StatusOr<int64_t> {
    TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare("UPDATE jobs SET owner = '', lease_expires_at = "
                                                           "'-infinity' WHERE id = ?1 AND lease_generation = ?2"));
    stmt.bind(1, id);
    stmt.bind(2, *generation);
    TF_RETURN_IF_ERROR(stmt.run());
    return connection.changes();
  }).get().status();
}

void RecordStore::forget_lease(std::string_view job_id) {
  if (!fences_) return;
  std::lock_guard lock(fences_->mutex);
  auto it = fences_->held.find(std::string(job_id));
  if (it == fences_->held.end()) return;
  fences_->released[it->first] = it->second;
  fences_->held.erase(it);
}

StatusOr<std::vector<std::string>> RecordStore::unleased_jobs(int limit) {
  if (!fences_) return not_shared(path_);
  std::vector<std::string> ids;
  TF_RETURN_IF_ERROR(with_reader([&](Connection& connection) -> Status {
    ids.clear();
    TF_ASSIGN_OR_RETURN(Statement stmt, connection.prepare("SELECT id FROM jobs WHERE state IN (?1, ?2) AND (owner = "
                                                           "'' OR lease_expires_at < clock_timestamp()) ORDER BY "
                                                           "created_at_us, rowid LIMIT ?3"));
    stmt.bind(1, int64_t{v1::QUEUED});
    stmt.bind(2, int64_t{v1::RUNNING});
    stmt.bind(3, int64_t{limit});
    for (;;) {
      TF_ASSIGN_OR_RETURN(bool row, stmt.step());
      if (!row) return Status();
      ids.emplace_back(stmt.column_text(0));
    }
  }));
  return ids;
}

StatusOr<v1::Job> RecordStore::request_cancel(std::string_view job_id) {
  if (!fences_) return not_shared(path_);
  std::string id(job_id);
  auto done = writer_->submit([&](Connection& connection) -> StatusOr<int64_t> {
    TF_ASSIGN_OR_RETURN(Statement select, connection.prepare("SELECT state, owner <> '' AND lease_expires_at >= "
                                                             "clock_timestamp() FROM jobs WHERE id = ?1 FOR UPDATE"));
    select.bind(1, id);
    TF_ASSIGN_OR_RETURN(bool found, select.step());
    if (!found) return not_found(fmt::format("job {} does not exist", id));
    auto state = static_cast<v1::JobState>(select.column_int(0));
    bool running_somewhere = select.column_int(1) != 0;
    if (state != v1::QUEUED && state != v1::RUNNING)
      return failed_precondition(fmt::format("job {} has already ended ({})", id, v1::JobState_Name(state)));
    TF_ASSIGN_OR_RETURN(Statement update,
                        connection.prepare(running_somewhere
                                               ? "UPDATE jobs SET cancel_requested = true WHERE id = ?1"
                                               : "UPDATE jobs SET state = ?2, finished_at_us = ?3, error = '', owner "
                                                 "= '', lease_generation = lease_generation + 1 WHERE id = ?1"));
    update.bind(1, id);
    if (!running_somewhere) {
      update.bind(2, int64_t{v1::CANCELLED});
      update.bind(3, static_cast<int64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count()));
    }
    TF_RETURN_IF_ERROR(update.run());
    return connection.changes();
  }).get();
  TF_RETURN_IF_ERROR(done.status());
  return get_job(job_id);
}

}  // namespace tunefarm::db
