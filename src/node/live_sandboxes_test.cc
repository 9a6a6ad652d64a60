#include "node/live_sandboxes.h"

#include <gtest/gtest.h>

namespace space::node {
namespace {

std::shared_ptr<LiveSandbox> Make(const std::string& id, int64_t expires_at_ms) {
  auto l = std::make_shared<LiveSandbox>();
  l->id = id;
  l->expires_at_ms = expires_at_ms;
  return l;
}

TEST(LiveSandboxesTest, InsertFindRemove) {
  LiveSandboxes table;
  table.Insert(Make("sbx_a", 0));
  table.Insert(Make("sbx_b", 0));
  EXPECT_EQ(table.size(), 2u);
  ASSERT_NE(table.Find("sbx_a"), nullptr);
  EXPECT_EQ(table.Find("sbx_zz"), nullptr);
  auto removed = table.Remove("sbx_a");
  ASSERT_NE(removed, nullptr);
  EXPECT_EQ(removed->id, "sbx_a");
  EXPECT_EQ(table.Remove("sbx_a"), nullptr);
  EXPECT_EQ(table.Ids(), std::vector<std::string>{"sbx_b"});
  EXPECT_EQ(table.TakeAll().size(), 1u);
  EXPECT_EQ(table.size(), 0u);
}

TEST(LiveSandboxesTest, AnEndingSandboxIsClaimedOnce) {
  LiveSandboxes table;
  table.Insert(Make("sbx_old", 100));
  table.Insert(Make("sbx_new", 900));
  auto expired = [](const LiveSandbox& l) { return l.expires_at_ms <= 500; };
  auto first = table.ClaimEndingIf(expired);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]->id, "sbx_old");
  EXPECT_TRUE(table.IsEnding("sbx_old"));
  EXPECT_TRUE(table.ClaimEndingIf(expired).empty());  // already ending: not claimed again
  table.UnmarkEnding("sbx_old");
  EXPECT_EQ(table.ClaimEndingIf(expired).size(), 1u);
  table.MarkEnding("sbx_new");
  EXPECT_TRUE(table.ClaimEndingIf([](const LiveSandbox&) { return true; }).empty());
}

}  // namespace
}  // namespace space::node
