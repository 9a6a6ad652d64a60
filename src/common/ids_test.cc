#include "common/ids.h"

#include <gtest/gtest.h>

#include <string>

#include "common/random.h"

namespace space {
namespace {

TEST(ValidateSandboxIdTest, Table) {
  struct Case {
    std::string id;
    bool ok;
  };
  const Case cases[] = {
      {NewId("sbx"), true},
      {"sbx_0AbC", true},
      {"a", true},
      {"a-b_C9", true},
      {"-", true},
      {std::string(64, 'Z'), true},
      {"", false},
      {std::string(65, 'a'), false},
      {".", false},
      {"..", false},
      {"a.b", false},
      {"a/b", false},
      {"a b", false},
      {"a\nb", false},
      {std::string("a\0b", 3), false},
      {"sbx_\xc3\xa9", false},
      {"a:b", false},
  };
  for (const Case& c : cases) {
    Status st = ValidateSandboxId(c.id);
    EXPECT_EQ(st.ok(), c.ok) << c.id;
    if (!c.ok) {
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.id;
    }
  }
}

TEST(IsSandboxIdCharTest, EveryByte) {
  for (int b = 0; b < 256; ++b) {
    char c = static_cast<char>(b);
    bool want = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    EXPECT_EQ(IsSandboxIdChar(c), want) << b;
  }
}

TEST(IsPublicIdTest, Table) {
  struct Case {
    std::string s;
    const char* prefix;
    bool ok;
  };
  const Case cases[] = {
      {NewId("sbx"), "sbx", true},
      {NewId("snap"), "snap", true},
      {"sbx_abc123", "sbx", true},
      {"sbx_" + std::string(64, 'a'), "sbx", true},
      {"sbx_", "sbx", false},
      {"sbx", "sbx", false},
      {"sbx_" + std::string(65, 'a'), "sbx", false},
      {"sbx_a/b", "sbx", false},
      {"sbx_a-b", "sbx", false},
      {"sbx_a_b", "sbx", false},
      {"sbxa", "sbx", false},
      {"proc_a", "sbx", false},
      {"sbx_a", "proc", false},
      {"SBX_a", "sbx", false},
      {"", "sbx", false},
  };
  for (const Case& c : cases) EXPECT_EQ(IsPublicId(c.s, c.prefix), c.ok) << c.s << " " << c.prefix;
}

// Every id NewId issues passes both checks: the API's and the layers' below it.
TEST(IdsTest, NewIdsPassBothChecks) {
  for (int i = 0; i < 100; ++i) {
    std::string id = NewId("sbx");
    EXPECT_TRUE(IsPublicId(id, "sbx")) << id;
    EXPECT_TRUE(ValidateSandboxId(id).ok()) << id;
  }
}

TEST(SandboxHostLabelTest, SurvivesLowercasing) {
  EXPECT_EQ(SandboxHostLabel("sbx_AbC09"), "sbx-abc09");
  EXPECT_EQ(SandboxHostLabel("sbx_abc09"), SandboxHostLabel("SBX-ABC09"));
}

}  // namespace
}  // namespace space
