// The fences of the job leases a RecordStore holds (record_store.h, "Leases"): shared by the store
// and the writer's operations, which check them inside their own transactions.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "db/connection.h"

namespace tunefarm::db {

struct LeaseFences {
  // The generation this store holds of each leased job, or last held of one it released or lost:
  // its writes about that job still commit only at that generation. Writes queued before a release
  // (the writer waits out an outage) once went through unfenced after it, and a job taken over
  // meanwhile recorded configs twice.
  std::optional<int64_t> generation(std::string_view job_id) const {
    std::lock_guard lock(mutex);
    auto it = held.find(std::string(job_id));
    if (it != held.end()) return it->second;
    it = released.find(std::string(job_id));
    if (it != released.end()) return it->second;
    return std::nullopt;
  }

  mutable std::mutex mutex;
  std::map<std::string, int64_t> held;      // Renewed by renew_leases.
  std::map<std::string, int64_t> released;  // No longer renewed; still fenced.
};

// OK when this store holds no lease of `job_id` or its lease is still at the generation taken
// (the job's row is then locked against a takeover until the transaction ends); otherwise
// FAILED_PRECONDITION. `fences` may be null (a history that is not shared).
Status check_fence(Connection& connection, const LeaseFences* fences, std::string_view job_id);

}  // namespace tunefarm::db
