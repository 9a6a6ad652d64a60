#include "node/recipe.h"

#include <gtest/gtest.h>

namespace space::node {
namespace {

TEST(RecipeTest, ConfigRoundTrips) {
  TemplateConfig c{.env = {{"A", "1"}}, .workdir = "/app", .user = "user", .start = "serve", .ready = "true"};
  auto back = ParseTemplateConfig(EncodeTemplateConfig(c));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, c);
}

TEST(RecipeTest, ConfigRefusesHostileText) {
  for (const char* text : {"", "[]", "{\"env\": []}", "{\"env\": {\"A=B\": \"x\"}}", "{\"start\": 5}",
                           "{\"env\": {\"\": \"x\"}}", "not json"}) {
    EXPECT_FALSE(ParseTemplateConfig(text).ok()) << text;
  }
  EXPECT_TRUE(ParseTemplateConfig("{\"unknown\": 1}").ok());
}

TEST(RecipeTest, CacheKeyDependsOnParentStepAndCopiedContent) {
  RecipeStep run{.kind = StepKind::kRun, .command = "echo hi"};
  RecipeStep other{.kind = StepKind::kRun, .command = "echo ho"};
  const std::string p1 = "sha256:" + std::string(64, 'a'), p2 = "sha256:" + std::string(64, 'b');
  EXPECT_EQ(StepCacheKey(p1, run, ""), StepCacheKey(p1, run, ""));
  EXPECT_NE(StepCacheKey(p1, run, ""), StepCacheKey(p2, run, ""));
  EXPECT_NE(StepCacheKey(p1, run, ""), StepCacheKey(p1, other, ""));
  RecipeStep copy{.kind = StepKind::kCopy, .src = "app", .dest = "/app"};
  EXPECT_NE(StepCacheKey(p1, copy, "sha256:1"), StepCacheKey(p1, copy, "sha256:2"));
  EXPECT_NE(FinalCacheKey(p1, "a", ""), FinalCacheKey(p1, "", "a"));
}

TEST(RecipeTest, StepsChangeTheConfig) {
  TemplateConfig c;
  ApplyStepToConfig({.kind = StepKind::kEnv, .env = {{"K", "V"}}}, &c);
  ApplyStepToConfig({.kind = StepKind::kWorkdir, .value = "/w"}, &c);
  ApplyStepToConfig({.kind = StepKind::kUser, .value = "user"}, &c);
  ApplyStepToConfig({.kind = StepKind::kRun, .command = "x"}, &c);
  EXPECT_EQ(c.env.at("K"), "V");
  EXPECT_EQ(c.workdir, "/w");
  EXPECT_EQ(c.user, "user");
}

TEST(RecipeTest, PathValidation) {
  EXPECT_TRUE(ValidateAbsolutePath("/app", "dest").ok());
  EXPECT_TRUE(ValidateAbsolutePath("/app/", "dest").ok());
  EXPECT_TRUE(ValidateAbsolutePath("/a..b/c", "dest").ok());
  for (const char* bad : {"", "app", "/a/../b", "/..", "/a/.."}) {
    EXPECT_FALSE(ValidateAbsolutePath(bad, "dest").ok()) << bad;
  }
  EXPECT_TRUE(ValidateContextPath(".", "src").ok());
  EXPECT_TRUE(ValidateContextPath("app/", "src").ok());
  for (const char* bad : {"", "/app", "../x", "a/../../b"}) {
    EXPECT_FALSE(ValidateContextPath(bad, "src").ok()) << bad;
  }
  EXPECT_TRUE(ValidateUserName("user").ok());
  EXPECT_TRUE(ValidateUserName("1000").ok());
  EXPECT_FALSE(ValidateUserName("-rf").ok());
  EXPECT_FALSE(ValidateUserName("a b").ok());
  EXPECT_FALSE(ValidateUserName("").ok());
}

}  // namespace
}  // namespace space::node
