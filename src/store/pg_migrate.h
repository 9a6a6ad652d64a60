// Brings a PostgreSQL database's schema up to kPostgresMigrations.
//
// Several servers may start at once against one database, so the whole check-and-apply runs in
// one transaction under a transaction-scoped advisory lock: the first server applies what is
// missing, the others wait on the lock and then find nothing left to do. Applied versions are
// rows of schema_migrations (version, applied_at_ms).
#pragma once

#include "common/status.h"
#include "store/pg_connection.h"

namespace space::store::pg {

// The advisory lock key migrations hold; other SPACE code must not take the same key.
inline constexpr int64_t kMigrationLockKey = 0x5350414345'4d47;  // "SPACEMG"

// Applies every migration `conn`'s database lacks. Fails with internal when the database is
// newer than this binary (it was migrated by a later release).
Status MigratePostgres(PgConnection& conn);

}  // namespace space::store::pg
