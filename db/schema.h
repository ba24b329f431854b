// The history's schema and its migrations. The schema version lives in SQLite's user_version, or in
// PostgreSQL's table tunefarm_schema; migrations run in order, each in the same transaction as the
// version bump, so a database is always at exactly one version. On PostgreSQL the migration holds an
// advisory lock, so that tunerds starting at the same moment migrate once, one after the other. A
// database written by a newer tunefarm is refused rather than guessed at, and a database that
// belongs to another program is never touched.
#pragma once

#include <span>
#include <string_view>

#include "common/status.h"
#include "db/sqlite.h"

namespace tunefarm::db {

struct Migration {
  int version;               // The schema version this migration produces; consecutive from 1.
  std::string_view summary;  // What it changes, for logs.
  std::string_view sql;
};

// The migrations of this version of tunefarm, oldest first: SQLite's, and PostgreSQL's (a history
// there started with the schema SQLite had reached, so it counts its versions from 1 again).
std::span<const Migration> migrations();
std::span<const Migration> postgres_migrations();

// The schema version this code reads and writes: the last migration's.
int current_schema_version();

// Brings the database on `connection` up to the last of `steps` (normally migrations() or
// postgres_migrations(), by the connection's dialect). An empty database is created from scratch; a
// database at a later version than `steps` know is an error.
Status migrate(Connection& connection, std::span<const Migration> steps);

}  // namespace tunefarm::db
