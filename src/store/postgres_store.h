// PostgreSQL implementation of Store, for several servers and nodes sharing one database.
//
// Same semantics as the SQLite store (sqlite_store.cc), tested by the same suite
// (store_test.cc). Connections come from a bounded pool (PgPool), so calls from many threads
// run in parallel; every statement is prepared once per connection and takes its values as
// parameters. Opening the store migrates the schema (pg_migrate.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "common/result.h"
#include "store/store.h"

namespace space::store {

struct PostgresOptions {
  size_t max_connections = 8;                         // per store (per process)
  std::chrono::milliseconds acquire_timeout{10'000};  // waiting for a free connection
};

// Opens the database at `url` (postgres://user:pass@host:port/db?options, or any libpq
// connection string) and migrates it. Unavailable when it cannot connect.
Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url, const PostgresOptions& options = {});

}  // namespace space::store
