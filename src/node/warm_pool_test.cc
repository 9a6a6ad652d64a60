#include "node/warm_pool.h"

#include <gtest/gtest.h>

namespace space::node {
namespace {

TEST(WarmPoolSpecTest, ParsesValidSpecs) {
  struct Case {
    const char* text;
    std::map<std::string, int> want;
  } cases[] = {
      {"", {}},
      {"  ", {}},
      {"base=4", {{"base", 4}}},
      {"base=4,busybox=8", {{"base", 4}, {"busybox", 8}}},
      {" base = 0 , busybox=256 ", {{"base", 0}, {"busybox", 256}}},
      {"my-tmpl.v2=1", {{"my-tmpl.v2", 1}}},
      {"base=2,base:vm=3", {{"base", 2}, {"base:vm", 3}}},
      {"base:ns=2", {{"base", 2}}},
  };
  for (const auto& c : cases) {
    auto got = ParseWarmPoolSpec(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status().ToString();
    EXPECT_EQ(*got, c.want) << c.text;
  }
}

TEST(WarmPoolSpecTest, RefusesHostileSpecs) {
  const char* cases[] = {
      "base",
      "base=",
      "=4",
      "base=-1",
      "base=257",
      "base=4x",
      "base=0x10",
      "base=4,base=2",
      "Base=1",
      "../etc=1",
      "a/b=1",
      "base=4,",
      ",base=4",
      "base=99999999999999999999",
      "base=1 2",
      "a=256,b=256,c=256,d=256,e=1",
      "base:kvm=1",
      "base:=1",
      ":vm=1",
      "base:vm:vm=1",
      "base=1,base:ns=1",
      "base:vm=1,base:vm=2",
      "Base:vm=1",
  };
  for (const char* c : cases) {
    EXPECT_FALSE(ParseWarmPoolSpec(c).ok()) << c;
  }
  EXPECT_FALSE(ParseWarmPoolSpec(std::string(5000, 'a')).ok());
  EXPECT_FALSE(ParseWarmPoolSpec(std::string_view("ba\0se=1", 7)).ok());
}

TEST(WarmPoolSpecTest, MetricsNameEveryTemplate) {
  std::map<std::string, WarmCounters> pools;
  pools["busybox"].target = 8;
  pools["busybox"].ready = 3;
  pools["busybox"].hits = 5;
  pools["base"].misses = 2;
  pools[WarmPoolKey("base", true)].ready = 4;
  std::string text = WarmPoolMetricsText(pools);
  EXPECT_NE(text.find("space_warm_pool_size{template=\"busybox\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("space_warm_pool_target{template=\"busybox\"} 8\n"), std::string::npos);
  EXPECT_NE(text.find("space_warm_pool_hits_total{template=\"busybox\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("space_warm_pool_misses_total{template=\"base\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("space_warm_pool_size{template=\"base\",runtime=\"vm\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE space_warm_pool_hits_total counter\n"), std::string::npos);
  EXPECT_EQ(WarmPoolMetricsText({}), "");
}

}  // namespace
}  // namespace space::node
