#include "http/validate.h"

#include <gtest/gtest.h>

namespace space::api {
namespace {

TEST(ValidateTest, ParseObjectRejectsNonObjects) {
  EXPECT_TRUE(ParseObject("").ok());
  EXPECT_TRUE(ParseObject("{}").ok());
  for (const char* bad : {"{oops", "[]", "3", "\"s\"", "{\"a\":}"}) EXPECT_FALSE(ParseObject(bad).ok()) << bad;
}

TEST(ValidateTest, TypedGettersCheckTypeAndRange) {
  auto j = nlohmann::json::parse(R"({"n": 5, "f": 2.5, "s": "x", "b": true, "big": 99999999999999999999,
                                     "m": {"A": "1"}, "bad_m": {"A": 1}, "l": ["a", 2]})");
  EXPECT_EQ(*GetInt(j, "n", 0, 0, 10), 5);
  EXPECT_FALSE(GetInt(j, "n", 0, 6, 10).ok());
  EXPECT_FALSE(GetInt(j, "s", 0, 0, 10).ok());
  EXPECT_FALSE(GetInt(j, "f", 0, 0, 10).ok());
  EXPECT_FALSE(GetInt(j, "big", 0, 0, 10).ok());
  EXPECT_EQ(*GetInt(j, "missing", 7, 0, 10), 7);
  EXPECT_FALSE(GetString(j, "n", "", 10).ok());
  EXPECT_FALSE(GetBool(j, "s", false).ok());
  EXPECT_TRUE(GetStringMap(j, "m", 4, 8, 8, IsEnvName).ok());
  EXPECT_FALSE(GetStringMap(j, "bad_m", 4, 8, 8, IsEnvName).ok());
  EXPECT_FALSE(GetStringList(j, "l", 4, 8).ok());
  EXPECT_FALSE(CheckKnownFields(j, {"n"}).ok());
}

TEST(ValidateTest, NamesAndPaths) {
  EXPECT_TRUE(IsEnvName("PATH_2"));
  EXPECT_FALSE(IsEnvName("2X"));
  EXPECT_FALSE(IsEnvName("A=B"));
  EXPECT_TRUE(IsTemplateName("base"));
  EXPECT_FALSE(IsTemplateName("../etc"));
  EXPECT_FALSE(IsTemplateName("Base"));
  EXPECT_TRUE(IsUserName("user"));
  EXPECT_TRUE(IsUserName("1000"));
  EXPECT_FALSE(IsUserName("root;rm"));
  EXPECT_TRUE(CheckSandboxPath("/tmp/../etc").ok());  // resolved inside the sandbox
  EXPECT_FALSE(CheckSandboxPath("relative").ok());
  EXPECT_FALSE(CheckSandboxPath(std::string("/a\0b", 4)).ok());
}

}  // namespace
}  // namespace space::api
