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
  // The generation this store holds of each leased job.
  std::optional<int64_t> generation(std::string_view job_id) const {
    std::lock_guard lock(mutex);
    auto it = held.find(std::string(job_id));
    if (it == held.end()) return std::nullopt;
    return it->second;
  }

  mutable std::mutex mutex;
  std::map<std::string, int64_t> held;
};

// OK when this store holds no lease of `job_id` or its lease is still at the generation taken
// (the job's row is then locked against a takeover until the transaction ends); otherwise
// FAILED_PRECONDITION. `fences` may be null (a history that is not shared).
Status check_fence(Connection& connection, const LeaseFences* fences, std::string_view job_id);

}  // namespace tunefarm::db
