#include "controlplane/scheduler.h"

#include <gtest/gtest.h>

#include "store/json_columns.h"

namespace space::controlplane {
namespace {

// A node as the store reads it back: its state and template list by their stored text.
store::NodeRecord Node(const std::string& name, int64_t capacity, int64_t live, const std::string& templates,
                       const std::string& state = "ready", int64_t hb = 1000) {
  return {name,     "http://127.0.0.1:1", store::ParseNodeState(state), capacity, live,
          store::ParseStringList(templates), hb, 0};
}

TEST(SchedulerTest, WeighsTemplateLocalityAgainstFreeCapacity) {
  std::vector<store::NodeRecord> nodes = {Node("a", 10, 1, "[\"busybox\"]"), Node("b", 10, 8, "[\"base\"]"),
                                          Node("c", 10, 2, "[\"base\"]")};
  auto n = PickNode(nodes, {"base", ""}, 1500, 5000);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->name, "c");  // holds base, more free than b
  n = PickNode(nodes, {"other", ""}, 1500, 5000);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->name, "a");  // nobody holds it: most free capacity
  // Locality is worth a quarter of the capacity, no more: a far fuller node loses it.
  nodes = {Node("a", 100, 80, "[\"base\"]"), Node("b", 100, 30, "[]")};
  EXPECT_EQ(PickNode(nodes, {"base", ""}, 1500, 5000)->name, "b");
  nodes = {Node("a", 100, 40, "[\"base\"]"), Node("b", 100, 30, "[]")};
  EXPECT_EQ(PickNode(nodes, {"base", ""}, 1500, 5000)->name, "a");
}

TEST(SchedulerTest, SkipsStaleDrainingLostFullAndExcludedNodes) {
  std::vector<store::NodeRecord> nodes = {Node("a", 10, 0, "[]", "draining"), Node("b", 10, 0, "[]", "lost"),
                                          Node("c", 10, 10, "[]"), Node("d", 10, 0, "[]", "ready", 0),
                                          Node("e", 10, 5, "[]")};
  auto n = PickNode(nodes, {"base", ""}, 6000, 5500);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->name, "e");
  EXPECT_EQ(PickNode(nodes, {"base", "e"}, 6000, 5500).status().code(), StatusCode::kUnavailable);
}

TEST(SchedulerTest, CountsPlacementsNotYetInAHeartbeat) {
  std::vector<store::NodeRecord> nodes = {Node("a", 10, 0, "[]"), Node("b", 10, 1, "[]")};
  EXPECT_EQ(PickNode(nodes, {"base", ""}, 1000, 5000)->name, "a");
  EXPECT_EQ(PickNode(nodes, {"base", ""}, 1000, 5000, {{"a", 2}})->name, "b");
  EXPECT_EQ(PickNode(nodes, {"base", ""}, 1000, 5000, {{"a", 10}, {"b", 9}}).status().code(),
            StatusCode::kUnavailable);
}

TEST(SchedulerTest, IgnoresMalformedTemplateLists) {
  std::vector<store::NodeRecord> nodes = {Node("a", 10, 0, "not json"), Node("b", 10, 1, "[1, \"base\"]")};
  EXPECT_EQ(PickNode(nodes, {"base", ""}, 1000, 5000)->name, "b");
}

}  // namespace
}  // namespace space::controlplane
