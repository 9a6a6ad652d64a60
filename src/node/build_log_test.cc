#include "node/build_log.h"

#include <gtest/gtest.h>

#include <thread>

namespace space::node {
namespace {

TEST(BuildLogTest, FollowReplaysThenEnds) {
  BuildLog log("t");
  log.Append({"step", {{"step", 1}}});
  log.Append({"log", {{"step", 1}, {"data", "hi\n"}}});
  std::thread finisher([&] { log.Finish({"done", {{"name", "t"}}}); });
  size_t next = 0;
  std::vector<BuildEvent> out;
  while (log.Follow(&next, &out, 1000)) {
  }
  finisher.join();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2].name, "done");
  log.Append({"log", {{"data", "late"}}});  // ignored once finished
  EXPECT_FALSE(log.Follow(&next, &out, 10));
  EXPECT_EQ(out.size(), 3u);
}

TEST(BuildLogTest, OutputIsCappedButStepsAreKept) {
  BuildLog log("t");
  const std::string chunk(1 << 20, 'x');
  for (int i = 0; i < 20; ++i) log.Append({"log", {{"step", 1}, {"data", chunk}}});
  log.Append({"step", {{"step", 2}}});
  log.Finish({"done", nlohmann::json::object()});
  size_t next = 0;
  std::vector<BuildEvent> out;
  while (log.Follow(&next, &out, 10)) {
  }
  EXPECT_LT(out.size(), 12u);
  EXPECT_EQ(out[out.size() - 2].name, "step");
}

TEST(BuildLogsTest, FindsByOperationAndTemplate) {
  BuildLogs logs;
  logs.Register("op_1", std::make_shared<BuildLog>("a"));
  EXPECT_TRUE(logs.Find("op_1", "a").ok());
  EXPECT_FALSE(logs.Find("op_1", "b").ok());
  for (int i = 0; i < 100; ++i) logs.Register("op_x" + std::to_string(i), std::make_shared<BuildLog>("a"));
  EXPECT_FALSE(logs.Find("op_1", "a").ok());  // only the latest are kept
}

}  // namespace
}  // namespace space::node
