#include "store/open_store.h"

#include <gtest/gtest.h>

namespace space::store {
namespace {

using Backend = StoreLocation::Backend;

TEST(ParseStoreUrl, ChoosesBackendByScheme) {
  struct Case {
    const char* url;
    bool ok;
    Backend backend;
    const char* target;
  };
  const Case cases[] = {
      {"/var/lib/space/state.db", true, Backend::kSqlite, "/var/lib/space/state.db"},
      {"state.db", true, Backend::kSqlite, "state.db"},
      {"sqlite:///var/lib/space/state.db", true, Backend::kSqlite, "/var/lib/space/state.db"},
      {"sqlite://rel.db", true, Backend::kSqlite, "rel.db"},
      {"postgres://u:p@h/db", true, Backend::kPostgres, "postgres://u:p@h/db"},
      {"postgresql:///db?host=/run/pg", true, Backend::kPostgres, "postgresql:///db?host=/run/pg"},
      {"", false, Backend::kSqlite, ""},
      {"sqlite://", false, Backend::kSqlite, ""},
      {"mysql://u:p@h/db", false, Backend::kSqlite, ""},
  };
  for (const Case& c : cases) {
    auto loc = ParseStoreUrl(c.url);
    ASSERT_EQ(loc.ok(), c.ok) << c.url;
    if (!c.ok) {
      EXPECT_EQ(loc.status().code(), StatusCode::kInvalidArgument) << c.url;
      EXPECT_EQ(loc.status().message().find(":p@"), std::string::npos) << loc.status().message();
      continue;
    }
    EXPECT_EQ(loc->backend, c.backend) << c.url;
    EXPECT_EQ(loc->target, c.target) << c.url;
  }
}

}  // namespace
}  // namespace space::store
