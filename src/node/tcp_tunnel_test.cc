#include "node/tcp_tunnel.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace space::node {
namespace {

using guest::FrameType;

struct Sent {
  FrameType type;
  std::string payload;
};

class TcpTunnelTest : public ::testing::Test {
 protected:
  TcpTunnelTest()
      : tunnel_(std::make_shared<TcpTunnel>(
            [this](FrameType t, std::string_view p) {
              std::lock_guard<std::mutex> lock(mu_);
              sent_.push_back({t, std::string(p)});
              return Status::Ok();
            },
            [this] { closed_ = true; })) {}

  void Guest(FrameType t, std::string payload = "") { tunnel_->OnFrame({t, 7, std::move(payload)}); }
  std::vector<Sent> Sent_() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }

  std::mutex mu_;
  std::vector<Sent> sent_;
  bool closed_ = false;
  std::shared_ptr<TcpTunnel> tunnel_;
};

TEST_F(TcpTunnelTest, OpensReadsAcksAndEnds) {
  Guest(FrameType::kTcpOpened, "{}");
  ASSERT_TRUE(tunnel_->WaitOpened(100).ok());
  Guest(FrameType::kTcpData, "hello ");
  Guest(FrameType::kTcpData, "world");
  char buf[64];
  Result<size_t> n = tunnel_->Read(buf, sizeof buf, 100);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buf, *n), "hello world");
  // Everything queued was read: the guest's window reopens by exactly that much.
  std::vector<Sent> sent = Sent_();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].type, FrameType::kTcpAck);
  EXPECT_EQ(*guest::ParseTcpAck(sent[0].payload), 11u);
  Guest(FrameType::kTcpData, "");  // the server's end of data
  n = tunnel_->Read(buf, sizeof buf, 100);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  tunnel_->Close();
  EXPECT_TRUE(closed_);
  EXPECT_EQ(Sent_().back().type, FrameType::kTcpClose);
}

TEST_F(TcpTunnelTest, RefusalIsTheGuestsMessage) {
  Guest(FrameType::kError, R"({"code":"unavailable","message":"nothing listens on port 9"})");
  Status st = tunnel_->WaitOpened(100);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(st.message(), "nothing listens on port 9");
}

TEST_F(TcpTunnelTest, GuestOverrunningItsWindowEndsTheStream) {
  Guest(FrameType::kTcpOpened, "{}");
  Guest(FrameType::kTcpData, std::string(guest::kTcpWindow, 'x'));
  Guest(FrameType::kTcpData, "y");  // one byte past the window
  // What arrived within the window is still there, then the stream is over.
  std::vector<char> buf(64 * 1024);
  size_t read = 0;
  bool ended = false;
  for (int i = 0; i < 1000 && !ended; ++i) {
    Result<size_t> n = tunnel_->Read(buf.data(), buf.size(), 100);
    ended = !n.ok();
    if (n.ok()) read += *n;
  }
  EXPECT_TRUE(ended);
  EXPECT_EQ(read, guest::kTcpWindow);
}

TEST_F(TcpTunnelTest, WriteWaitsForAcksAndBadAcksEndTheStream) {
  Guest(FrameType::kTcpOpened, "{}");
  ASSERT_TRUE(tunnel_->Write(std::string(guest::kTcpWindow, 'a'), 100).ok());
  // The window is full: more waits, and fails when no ack comes.
  EXPECT_EQ(tunnel_->Write("b", 50).code(), StatusCode::kDeadlineExceeded);
  std::thread acker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Guest(FrameType::kTcpAck, guest::EncodeTcpAck(1024));
  });
  EXPECT_TRUE(tunnel_->Write("b", 2000).ok());
  acker.join();
  Guest(FrameType::kTcpAck, guest::EncodeTcpAck(guest::kTcpWindow + 5));  // more than in flight
  EXPECT_FALSE(tunnel_->Write("c", 100).ok());
}

TEST_F(TcpTunnelTest, ChannelLossEndsReaders) {
  Guest(FrameType::kTcpOpened, "{}");
  std::thread lose([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    tunnel_->OnChannelClosed(Unavailable("gone"));
  });
  char buf[8];
  Result<size_t> n = tunnel_->Read(buf, sizeof buf, 2000);
  lose.join();
  EXPECT_FALSE(n.ok());
}

}  // namespace
}  // namespace space::node
