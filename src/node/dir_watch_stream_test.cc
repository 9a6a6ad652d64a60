#include "node/dir_watch_stream.h"

#include <gtest/gtest.h>

#include <string>

namespace space::node {
namespace {

guest::Frame F(guest::FrameType type, std::string payload) { return guest::Frame{type, 7, std::move(payload)}; }

TEST(DirWatchStreamTest, StartsThenQueuesValidEvents) {
  int closed = 0;
  DirWatchStream w([&] { ++closed; });
  w.OnFrame(F(guest::FrameType::kWatchEvents, R"({"events":[{"name":"early","type":"create"}]})"));  // before start
  w.OnFrame(F(guest::FrameType::kWatchStarted, "{}"));
  ASSERT_TRUE(w.WaitStarted(0).ok());
  w.OnFrame(F(guest::FrameType::kWatchEvents,
              R"({"events":[{"name":"a","type":"create"},{"name":"d/b","type":"remove"}],"overflow":false})"));
  std::vector<DirChange> got;
  bool overflow = true;
  ASSERT_TRUE(w.Next(&got, &overflow, 0).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, "a");
  EXPECT_EQ(got[0].type, DirChange::Type::kCreate);
  EXPECT_EQ(got[1].name, "d/b");
  EXPECT_EQ(got[1].type, DirChange::Type::kRemove);
  EXPECT_FALSE(overflow);
  w.Close();
  w.Close();
  EXPECT_EQ(closed, 1);
}

TEST(DirWatchStreamTest, HostileBatchesBecomeOverflow) {
  const std::string bad[] = {
      "not json",
      "[]",
      R"({"events":"x"})",
      R"({"events":[{"name":"a","type":"explode"}]})",
      R"({"events":[{"name":"","type":"create"}]})",
      R"({"events":[{"name":5,"type":"create"}]})",
      R"({"events":[{"name":"a\u0000b","type":"create"}]})",
      "{\"events\":[{\"name\":\"" + std::string(5000, 'n') + "\",\"type\":\"create\"}]}",
      R"({"events":[],"overflow":true})",
  };
  for (const std::string& payload : bad) {
    DirWatchStream w(nullptr);
    w.OnFrame(F(guest::FrameType::kWatchStarted, "{}"));
    w.OnFrame(F(guest::FrameType::kWatchEvents, payload));
    std::vector<DirChange> got;
    bool overflow = false;
    ASSERT_TRUE(w.Next(&got, &overflow, 0).ok()) << payload;
    EXPECT_TRUE(got.empty()) << payload;
    EXPECT_TRUE(overflow) << payload;
  }
}

TEST(DirWatchStreamTest, QueueIsCapped) {
  DirWatchStream w(nullptr);
  w.OnFrame(F(guest::FrameType::kWatchStarted, "{}"));
  std::string batch = R"({"events":[)";
  for (int i = 0; i < 100; ++i) batch += std::string(i ? "," : "") + R"({"name":"f","type":"write"})";
  batch += "]}";
  for (size_t i = 0; i < DirWatchStream::kMaxQueued / 100 + 2; ++i) w.OnFrame(F(guest::FrameType::kWatchEvents, batch));
  std::vector<DirChange> got;
  bool overflow = false;
  ASSERT_TRUE(w.Next(&got, &overflow, 0).ok());
  EXPECT_EQ(got.size(), DirWatchStream::kMaxQueued);
  EXPECT_TRUE(overflow);
}

TEST(DirWatchStreamTest, EndsWithTheGuestsErrorOrTheChannel) {
  DirWatchStream refused(nullptr);
  refused.OnFrame(F(guest::FrameType::kError, R"({"code":"not_found","message":"no such dir"})"));
  Status st = refused.WaitStarted(0);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.message(), "no such dir");

  DirWatchStream odd(nullptr);
  odd.OnFrame(F(guest::FrameType::kError, R"({"code":"ok","message":"fine"})"));  // not a word a watch ends with
  EXPECT_EQ(odd.WaitStarted(0).code(), StatusCode::kInternal);

  DirWatchStream gone(nullptr);
  gone.OnFrame(F(guest::FrameType::kWatchStarted, "{}"));
  gone.OnFrame(F(guest::FrameType::kWatchEvents, R"({"events":[{"name":"last","type":"remove"}]})"));
  gone.OnChannelClosed(Unavailable("sandbox went away"));
  std::vector<DirChange> got;
  bool overflow = false;
  ASSERT_TRUE(gone.Next(&got, &overflow, 0).ok());  // what came before the end is still taken
  EXPECT_EQ(got.size(), 1u);
  got.clear();
  EXPECT_EQ(gone.Next(&got, &overflow, 0).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace space::node
