#include "store/open_store.h"

#include <string_view>

#include "store/postgres_store.h"

namespace space::store {

Result<StoreLocation> ParseStoreUrl(const std::string& url) {
  std::string_view u = url;
  if (u.empty()) return InvalidArgument("store URL is empty");
  if (u.starts_with("postgres://") || u.starts_with("postgresql://")) {
    return StoreLocation{StoreLocation::Backend::kPostgres, url};
  }
  if (u.starts_with("sqlite://")) {
    std::string path(u.substr(std::string_view("sqlite://").size()));
    if (path.empty()) return InvalidArgument("store URL " + url + " names no file");
    return StoreLocation{StoreLocation::Backend::kSqlite, path};
  }
  size_t scheme = u.find("://");
  if (scheme != std::string_view::npos) {
    return InvalidArgument("store URL scheme '" + std::string(u.substr(0, scheme)) +
                           "' is not one of sqlite, postgres, postgresql");
  }
  return StoreLocation{StoreLocation::Backend::kSqlite, url};
}

Result<std::unique_ptr<Store>> OpenStore(const std::string& url) {
  ASSIGN_OR_RETURN(StoreLocation loc, ParseStoreUrl(url));
  if (loc.backend == StoreLocation::Backend::kPostgres) return OpenPostgresStore(loc.target);
  return OpenSqliteStore(loc.target);
}

}  // namespace space::store
