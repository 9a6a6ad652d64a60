#include "node/guest_client.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <unistd.h>

#include <condition_variable>

#include "common/syscall.h"
#include "node/process.h"

namespace space::node {
namespace {

// A fake guest: the test writes raw bytes to the other end of the channel.
struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    node = UniqueFd(fds[0]);
    guest = UniqueFd(fds[1]);
  }
  UniqueFd node, guest;
};

TEST(GuestClientTest, NeedsHelloFirst) {
  Pair p;
  GuestClient c(std::move(p.node), "sbx_t");
  ASSERT_TRUE(WriteAll(p.guest.get(), guest::EncodeFrame(guest::FrameType::kStdout, 0, "hi")).ok());
  EXPECT_FALSE(c.Start(1000).ok());
}

TEST(GuestClientTest, SilentGuestTimesOut) {
  Pair p;
  GuestClient c(std::move(p.node), "sbx_t");
  Status st = c.Start(50);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
}

TEST(GuestClientTest, GarbageClosesTheChannelAndFailsStreams) {
  const std::string garbage[] = {
      std::string("\x07\x0b\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00", 12),  // bad version
      std::string("\x01\x0d\x00\x00\x01\x00\x00\x00\xff\xff\xff\x7f", 12),  // 2 GiB payload
  };
  for (const auto& bytes : garbage) {
    Pair p;
    GuestClient c(std::move(p.node), "sbx_t");
    ASSERT_TRUE(WriteAll(p.guest.get(), guest::EncodeFrame(guest::FrameType::kHello, 0, R"({"version":1})")).ok());
    ASSERT_TRUE(c.Start(1000).ok());
    auto proc = std::make_shared<Process>("proc_1", ProcessSpec{}, 0);
    uint32_t stream = c.OpenStream(proc);
    ASSERT_TRUE(WriteAll(p.guest.get(), guest::EncodeFrame(guest::FrameType::kExecStarted, stream, "{}")).ok());
    ASSERT_TRUE(proc->WaitStarted(1000).ok());
    ASSERT_TRUE(WriteAll(p.guest.get(), bytes).ok());
    ASSERT_TRUE(proc->WaitExited(2000));  // the channel dropped, the process is reported killed
    EXPECT_FALSE(c.alive());
    EXPECT_FALSE(c.Send(guest::FrameType::kPing, 0, "").ok());
    // The node learns why, so it can fail the sandbox with a reason.
    ASSERT_TRUE(c.lost().has_value());
    EXPECT_NE(c.lost()->message().find("guest channel closed"), std::string::npos) << c.lost()->message();
  }
}

TEST(GuestClientTest, ShutdownIsNotALoss) {
  Pair p;
  GuestClient c(std::move(p.node), "sbx_t");
  EXPECT_FALSE(c.lost().has_value());
  ASSERT_TRUE(WriteAll(p.guest.get(), guest::EncodeFrame(guest::FrameType::kHello, 0, R"({"version":1})")).ok());
  ASSERT_TRUE(c.Start(1000).ok());
  EXPECT_FALSE(c.lost().has_value());
  c.Shutdown();
  EXPECT_FALSE(c.alive());
  EXPECT_FALSE(c.lost().has_value());
}

TEST(GuestClientTest, GuestClosingItsEndIsALoss) {
  Pair p;
  GuestClient c(std::move(p.node), "sbx_t");
  ASSERT_TRUE(WriteAll(p.guest.get(), guest::EncodeFrame(guest::FrameType::kHello, 0, R"({"version":1})")).ok());
  ASSERT_TRUE(c.Start(1000).ok());
  p.guest.reset();
  for (int i = 0; i < 200 && !c.lost().has_value(); ++i) ::usleep(10000);
  ASSERT_TRUE(c.lost().has_value());
  EXPECT_FALSE(c.alive());
}

TEST(GuestClientTest, FramesForUnknownStreamsAreDropped) {
  Pair p;
  GuestClient c(std::move(p.node), "sbx_t");
  ASSERT_TRUE(WriteAll(p.guest.get(), guest::EncodeFrame(guest::FrameType::kHello, 0, R"({"version":1})")).ok());
  ASSERT_TRUE(c.Start(1000).ok());
  auto proc = std::make_shared<Process>("proc_1", ProcessSpec{}, 0);
  uint32_t stream = c.OpenStream(proc);
  ASSERT_TRUE(WriteAll(p.guest.get(), guest::EncodeFrame(guest::FrameType::kStdout, stream + 7, "x")).ok());
  ASSERT_TRUE(WriteAll(p.guest.get(), guest::EncodeFrame(guest::FrameType::kExecStarted, stream, "{}")).ok());
  ASSERT_TRUE(WriteAll(p.guest.get(), guest::EncodeFrame(guest::FrameType::kStdout, stream, "mine")).ok());
  ASSERT_TRUE(WriteAll(p.guest.get(), guest::EncodeFrame(guest::FrameType::kExit, stream, R"({"exit_code":0})")).ok());
  ASSERT_TRUE(proc->WaitExited(2000));
  EXPECT_EQ(proc->Collected(ProcessEvent::Kind::kStdout), "mine");
  EXPECT_TRUE(c.alive());
}

}  // namespace
}  // namespace space::node
