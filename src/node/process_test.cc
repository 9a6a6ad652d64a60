#include "node/process.h"

#include <gtest/gtest.h>

#include <csignal>

namespace space::node {
namespace {

guest::Frame F(guest::FrameType t, std::string payload = "") { return {t, 1, std::move(payload)}; }

TEST(ProcessTest, CollectsOutputAndExit) {
  Process p("proc_1", {}, 0);
  int exits = 0;
  p.set_on_exit([&](const Process&) { ++exits; });
  p.OnFrame(F(guest::FrameType::kExecStarted, R"({"pid":7})"));
  ASSERT_TRUE(p.WaitStarted(10).ok());
  p.OnFrame(F(guest::FrameType::kStdout, "out"));
  p.OnFrame(F(guest::FrameType::kStderr, "err"));
  p.OnFrame(F(guest::FrameType::kExit, R"({"exit_code":3,"signal":null,"timed_out":false})"));
  p.OnFrame(F(guest::FrameType::kStdout, "late"));  // after exit: dropped
  ASSERT_TRUE(p.WaitExited(10));
  EXPECT_EQ(p.Collected(ProcessEvent::Kind::kStdout), "out");
  EXPECT_EQ(p.Collected(ProcessEvent::Kind::kStderr), "err");
  EXPECT_EQ(p.exit_info()->exit_code, 3);
  EXPECT_EQ(exits, 1);
}

TEST(ProcessTest, HostileExitPayloadsAreBounded) {
  const char* payloads[] = {"", "garbage", "[]", R"({"exit_code":"3"})", R"({"exit_code":100000})",
                            R"({"signal":-4,"timed_out":"yes"})", R"({"exit_code":1e300})"};
  for (const char* payload : payloads) {
    Process p("proc_1", {}, 0);
    p.OnFrame(F(guest::FrameType::kExecStarted));
    p.OnFrame(F(guest::FrameType::kExit, payload));
    ASSERT_TRUE(p.WaitExited(10)) << payload;
    auto e = p.exit_info();
    EXPECT_FALSE(e->exit_code.has_value()) << payload;
    EXPECT_FALSE(e->signal.has_value()) << payload;
    EXPECT_FALSE(e->timed_out) << payload;
  }
}

TEST(ProcessTest, OutputBeyondCapIsCountedNotKept) {
  Process p("proc_1", {}, 0);
  p.OnFrame(F(guest::FrameType::kExecStarted));
  std::string chunk(1 << 20, 'x');
  for (size_t i = 0; i < Process::kMaxRetainedBytes / chunk.size() + 3; ++i) {
    p.OnFrame(F(guest::FrameType::kStdout, chunk));
  }
  EXPECT_TRUE(p.truncated());
  EXPECT_LE(p.Collected(ProcessEvent::Kind::kStdout).size(), Process::kMaxRetainedBytes);
  EXPECT_GT(p.stdout_bytes(), static_cast<int64_t>(Process::kMaxRetainedBytes));
}

TEST(ProcessTest, RingOutputKeepsTheLatestBytesAndFollowersSkipWhatWasDropped) {
  ProcessSpec spec;
  spec.output_ring = true;
  Process p("proc_1", spec, 0);
  int asked = 0;
  p.set_on_truncated([&] { ++asked; });
  p.OnFrame(F(guest::FrameType::kExecStarted));
  size_t next = 0;
  std::vector<ProcessEvent> seen;
  ASSERT_TRUE(p.Follow(&next, &seen, 10));  // the start event
  const size_t chunk = 64 * 1024;
  const size_t n = 3 * Process::kRingBytes / chunk;
  for (size_t i = 0; i < n; ++i)
    p.OnFrame(F(guest::FrameType::kStdout, std::string(chunk, static_cast<char>('a' + i % 26))));
  EXPECT_FALSE(p.truncated());
  EXPECT_EQ(asked, 0);  // the guest keeps sending
  EXPECT_EQ(p.stdout_bytes(), static_cast<int64_t>(n * chunk));
  EXPECT_EQ(p.Collected(ProcessEvent::Kind::kStdout).size(), Process::kRingBytes);
  // A follower that fell behind resumes at the oldest kept event, the newest last.
  seen.clear();
  ASSERT_TRUE(p.Follow(&next, &seen, 10));
  ASSERT_EQ(seen.size(), Process::kRingBytes / chunk);
  EXPECT_EQ(seen.back().data[0], static_cast<char>('a' + (n - 1) % 26));
  EXPECT_EQ(next, n + 1);
  p.OnFrame(F(guest::FrameType::kExit, R"({"exit_code":0})"));
  seen.clear();
  EXPECT_FALSE(p.Follow(&next, &seen, 10));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].kind, ProcessEvent::Kind::kExit);
}

TEST(ProcessTest, TruncationAsksTheGuestToDropOutputOnceAndCountsWhatItDropped) {
  Process p("proc_1", {}, 0);
  int asked = 0;
  p.set_on_truncated([&] { ++asked; });
  p.OnFrame(F(guest::FrameType::kExecStarted));
  std::string chunk(1 << 20, 'x');
  for (size_t i = 0; i < Process::kMaxRetainedBytes / chunk.size(); ++i) p.OnFrame(F(guest::FrameType::kStdout, chunk));
  EXPECT_EQ(asked, 0);  // exactly at the cap: everything kept
  p.OnFrame(F(guest::FrameType::kStdout, "y"));
  p.OnFrame(F(guest::FrameType::kStdout, "y"));
  EXPECT_EQ(asked, 1);
  const int64_t sent = p.stdout_bytes();
  p.OnFrame(F(guest::FrameType::kExit, R"({"exit_code":0,"dropped_stdout":1000,"dropped_stderr":7})"));
  ASSERT_TRUE(p.WaitExited(10));
  EXPECT_EQ(p.stdout_bytes(), sent + 1000);
  EXPECT_EQ(p.stderr_bytes(), 7);
  EXPECT_EQ(asked, 1);

  // A guest that was never asked cannot inflate the totals.
  Process q("proc_2", {}, 0);
  q.OnFrame(F(guest::FrameType::kExecStarted));
  q.OnFrame(F(guest::FrameType::kExit, R"({"exit_code":0,"dropped_stdout":1000})"));
  ASSERT_TRUE(q.WaitExited(10));
  EXPECT_EQ(q.stdout_bytes(), 0);
}

TEST(ProcessTest, RefusedStartAndLostChannel) {
  Process refused("proc_1", {}, 0);
  refused.OnFrame(F(guest::FrameType::kError, R"({"code":"not_found","message":"exec /x: ENOENT"})"));
  Status st = refused.WaitStarted(10);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("ENOENT"), std::string::npos);

  // A sandbox at its task limit is out of room, not sent a bad request.
  Process full("proc_3", {}, 0);
  full.OnFrame(F(guest::FrameType::kError, R"({"code":"resource_exhausted","message":"fork sh: EAGAIN"})"));
  EXPECT_EQ(full.WaitStarted(10).code(), StatusCode::kResourceExhausted);

  Process lost("proc_2", {}, 0);
  lost.OnFrame(F(guest::FrameType::kExecStarted));
  lost.OnChannelClosed(Unavailable("gone"));
  ASSERT_TRUE(lost.WaitExited(10));
  EXPECT_EQ(lost.exit_info()->signal, SIGKILL);
}

TEST(ProcessTest, FollowReplaysThenEnds) {
  Process p("proc_1", {}, 0);
  p.OnFrame(F(guest::FrameType::kExecStarted));
  p.OnFrame(F(guest::FrameType::kStdout, "a"));
  p.OnFrame(F(guest::FrameType::kExit, R"({"exit_code":0})"));
  size_t next = 0;
  std::vector<ProcessEvent> events;
  while (p.Follow(&next, &events, 10)) {
  }
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kind, ProcessEvent::Kind::kStart);
  EXPECT_EQ(events[1].data, "a");
  EXPECT_EQ(events[2].kind, ProcessEvent::Kind::kExit);
}

TEST(SignalTest, NamesRoundTrip) {
  EXPECT_EQ(SignalName(9), "SIGKILL");
  EXPECT_EQ(SignalNumber("SIGTERM"), 15);
  EXPECT_EQ(SignalNumber("TERM"), 15);
  EXPECT_EQ(SignalNumber("9"), 9);
  EXPECT_FALSE(SignalNumber("SIGNOPE").has_value());
  EXPECT_FALSE(SignalNumber("999").has_value());
  EXPECT_FALSE(SignalNumber("").has_value());
}

}  // namespace
}  // namespace space::node
