// Moving a history to another database (a SQLite file into a PostgreSQL that several tunerds will
// share): every record and every job, as they are. Jobs keep their ids and states, so a job that
// was queued or running is resumed from its records by a tunerd of the new history. Copying again
// skips what is there already.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "db/record_store.h"

namespace tunefarm::db {

struct CopyReport {
  int64_t records = 0;          // New in the destination.
  int64_t records_skipped = 0;  // There already.
  int64_t jobs = 0;
  int64_t jobs_skipped = 0;
};

StatusOr<CopyReport> copy_history(RecordStore& from, RecordStore& to);

}  // namespace tunefarm::db
