// Salvage of a damaged history: every record and job SQLite can still read from it, copied into a new
// history that tunerd then opens as its own. The damaged file is opened read-only and never
// changed; rows on damaged pages, and rows that do not parse, are counted and left behind.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace tunefarm::db {

struct SalvageReport {
  int64_t records = 0;     // Copied into the new history.
  int64_t jobs = 0;        // Copied with their states, specs and progress.
  int64_t unreadable = 0;  // Rows SQLite could not read or that did not parse.
};

// Copies what can be read of the history at `damaged` into a new history at `out`, which must not
// exist yet. Jobs keep their ids and states: tunerd on the new history lists them, and resumes the
// ones that were queued or running from the records salvaged with them.
StatusOr<SalvageReport> salvage_history(const std::string& damaged, const std::string& out);

}  // namespace tunefarm::db
