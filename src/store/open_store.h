// Chooses the Store backend from a URL, so every binary takes one --store flag:
//   /path/state.db, sqlite:///path/state.db, sqlite://relative.db   -> SQLite file
//   postgres://... , postgresql://...                                -> PostgreSQL (libpq URI)
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "store/store.h"

namespace space::store {

struct StoreLocation {
  enum class Backend { kSqlite, kPostgres };
  Backend backend = Backend::kSqlite;
  std::string target;  // SQLite: the file path; PostgreSQL: the URL as given
};

// invalid_argument for an empty string or an unknown scheme.
Result<StoreLocation> ParseStoreUrl(const std::string& url);

// Opens (creating and migrating) the store `url` names.
Result<std::unique_ptr<Store>> OpenStore(const std::string& url);

}  // namespace space::store
