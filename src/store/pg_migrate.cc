#include "store/pg_migrate.h"

#include <chrono>
#include <iterator>
#include <string>

#include "store/postgres_migrations.h"

namespace space::store::pg {
namespace {

constexpr Statement kLock{"migrate_lock", "SELECT pg_advisory_xact_lock($1::bigint)"};
constexpr Statement kVersion{"migrate_version", "SELECT COALESCE(MAX(version), 0) FROM schema_migrations"};
constexpr Statement kRecord{"migrate_record",
                            "INSERT INTO schema_migrations (version, applied_at_ms) VALUES ($1, $2)"};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Everything after BEGIN; the caller commits or rolls back.
Status MigrateInTransaction(PgConnection& conn) {
  RETURN_IF_ERROR(conn.Run(kLock, {kMigrationLockKey}, "migrate: advisory lock").status());
  RETURN_IF_ERROR(conn.ExecScript("CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, "
                                  "applied_at_ms BIGINT NOT NULL)",
                                  "migrate: create schema_migrations"));
  ASSIGN_OR_RETURN(PgRows rows, conn.Run(kVersion, {}, "migrate: read version"));
  int64_t version = rows.Int(0, 0);
  constexpr int64_t kCount = static_cast<int64_t>(std::size(kPostgresMigrations));
  if (version > kCount) {
    return Internal("postgres migrate: schema version " + std::to_string(version) + " is newer than this binary (" +
                    std::to_string(kCount) + ")");
  }
  for (int64_t v = version; v < kCount; ++v) {
    std::string op = "migrate: apply migration " + std::to_string(v + 1);
    RETURN_IF_ERROR(conn.ExecScript(kPostgresMigrations[v], op));
    RETURN_IF_ERROR(conn.Run(kRecord, {v + 1, NowMs()}, op).status());
  }
  return Status::Ok();
}

}  // namespace

Status MigratePostgres(PgConnection& conn) {
  RETURN_IF_ERROR(conn.ExecScript("BEGIN", "migrate: begin"));
  Status st = MigrateInTransaction(conn);
  if (!st.ok()) {
    // A failed rollback leaves the connection in a transaction; the pool then closes it.
    (void)conn.ExecScript("ROLLBACK", "migrate: rollback");
    return st;
  }
  return conn.ExecScript("COMMIT", "migrate: commit");
}

}  // namespace space::store::pg
