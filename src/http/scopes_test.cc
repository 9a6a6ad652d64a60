#include "http/scopes.h"

#include <gtest/gtest.h>

namespace space::api {
namespace {

TEST(ScopesTest, WriteGrantsReadAndAdminGrantsAll) {
  EXPECT_TRUE(HasScope({"sandboxes:write"}, "sandboxes:read"));
  EXPECT_TRUE(HasScope({"sandboxes:write"}, "sandboxes:write"));
  EXPECT_FALSE(HasScope({"sandboxes:read"}, "sandboxes:write"));
  EXPECT_FALSE(HasScope({"templates:write"}, "sandboxes:read"));
  EXPECT_FALSE(HasScope({"sandboxes:write"}, "admin"));
  EXPECT_TRUE(HasScope({"admin"}, "egress:write"));
  EXPECT_TRUE(HasScope({}, ""));
  EXPECT_FALSE(HasScope({}, "sandboxes:read"));
  // A near miss grants nothing.
  EXPECT_FALSE(HasScope({"sandboxes:writeX"}, "sandboxes:read"));
  EXPECT_FALSE(HasScope({"sandbox:write"}, "sandboxes:read"));
}

TEST(ScopesTest, EachRouteNeedsItsAreasScope) {
  struct Case {
    const char* method;
    std::vector<std::string> path;
    const char* need;
  } cases[] = {
      {"GET", {"v1", "sandboxes"}, "sandboxes:read"},
      {"POST", {"v1", "sandboxes"}, "sandboxes:write"},
      {"GET", {"v1", "sandboxes", "sbx_1", "files"}, "sandboxes:read"},
      {"POST", {"v1", "sandboxes", "sbx_1", "exec"}, "sandboxes:write"},
      {"GET", {"v1", "sandboxes", "sbx_1", "terminal"}, "sandboxes:write"},
      {"DELETE", {"v1", "snapshots", "snap_1"}, "sandboxes:write"},
      {"GET", {"v1", "audit"}, "sandboxes:read"},
      {"GET", {"v1", "operations", "op_1"}, ""},
      {"POST", {"v1", "templates"}, "templates:write"},
      {"GET", {"v1", "templates", "base"}, "templates:read"},
      {"PUT", {"v1", "egress-profiles", "p"}, "egress:write"},
      {"PUT", {"v1", "credentials", "c"}, "egress:write"},
      {"GET", {"v1", "credentials"}, "egress:read"},
      {"POST", {"v1", "teams"}, "admin"},
      {"GET", {"v1", "keys"}, "admin"},
      {"GET", {"v1", "keys", "self"}, ""},
      {"DELETE", {"v1", "keys", "self"}, "admin"},
      {"GET", {"v1", "nodes"}, "admin"},
      {"GET", {"v1", "something-new"}, "admin"},
      {"GET", {"metrics"}, "sandboxes:read"},
  };
  for (const auto& c : cases) {
    std::string joined;
    for (const auto& s : c.path) joined += "/" + s;
    EXPECT_EQ(ScopeFor(c.method, c.path), c.need) << c.method << " " << joined;
  }
}

TEST(ScopesTest, KnownScopes) {
  for (const auto& s : AllScopes()) EXPECT_TRUE(IsScope(s)) << s;
  EXPECT_FALSE(IsScope("sandboxes"));
  EXPECT_FALSE(IsScope("root"));
  for (const auto& s : DefaultScopes()) EXPECT_NE(s, "admin");
}

}  // namespace
}  // namespace space::api
