#include "runtime/vm/qmp_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "common/syscall.h"

namespace space::runtime::vm {
namespace {

// A scripted QMP server on the other end of a socket pair: for each command line it reads,
// it writes the next canned reply (events first where the script says so).
class FakeQemu {
 public:
  explicit FakeQemu(std::vector<std::string> replies) : replies_(std::move(replies)) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    client_.reset(sv[0]);
    server_.reset(sv[1]);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeQemu() {
    ::shutdown(server_.get(), SHUT_RDWR);
    thread_.join();
  }
  UniqueFd TakeClient() { return std::move(client_); }
  std::vector<std::string> received;
  int fds_received = 0;

 private:
  void Serve() {
    (void)WriteAll(server_.get(), R"({"QMP": {"version": {}, "capabilities": []}})" "\r\n");
    std::string buf;
    size_t next = 0;
    for (;;) {
      char c[4096];
      char control[CMSG_SPACE(sizeof(int))];
      iovec iov{c, sizeof c};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      ssize_t n = ::recvmsg(server_.get(), &msg, 0);
      if (n <= 0) return;
      if (CMSG_FIRSTHDR(&msg) != nullptr) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof fd);
        ::close(fd);
        ++fds_received;
      }
      buf.append(c, static_cast<size_t>(n));
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos) {
        received.push_back(buf.substr(0, nl));
        buf.erase(0, nl + 1);
        std::string reply = next < replies_.size() ? replies_[next++] : R"({"return": {}})";
        (void)WriteAll(server_.get(), reply + "\r\n");
      }
    }
  }
  std::vector<std::string> replies_;
  UniqueFd client_, server_;
  std::thread thread_;
};

TEST(QmpClient, HandshakeCommandsEventsAndErrors) {
  FakeQemu q({R"({"return": {}})",
              R"({"event": "STOP", "timestamp": {}})" "\r\n" R"({"return": {"status": "paused"}})",
              R"({"error": {"class": "GenericError", "desc": "no such thing"}})"});
  QmpClient c(q.TakeClient());
  ASSERT_TRUE(c.Handshake(2000).ok());
  auto r = c.Execute("query-status");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["status"], "paused");
  auto e = c.Execute("bogus");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("GenericError: no such thing"), std::string::npos);
}

TEST(QmpClient, PassesFdsWithGetfd) {
  FakeQemu q({R"({"return": {}})", R"({"return": {}})"});
  QmpClient c(q.TakeClient());
  ASSERT_TRUE(c.Handshake(2000).ok());
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ASSERT_TRUE(c.SendFd("checkpoint", p[1]).ok());
  ::close(p[0]);
  ::close(p[1]);
  auto r = c.Execute("query-status");  // serialized after getfd's reply
  EXPECT_TRUE(r.ok());
}

TEST(QmpClient, TimedOutCommandLeavesTheClientBroken) {
  // The second command is answered with an event only: it times out, and its late reply
  // must never be taken for the next command's.
  FakeQemu q({R"({"return": {}})", R"({"event": "STOP", "timestamp": {}})"});
  QmpClient c(q.TakeClient());
  ASSERT_TRUE(c.Handshake(2000).ok());
  auto slow = c.Execute("stop", nlohmann::json::object(), 100);
  EXPECT_EQ(slow.status().code(), StatusCode::kDeadlineExceeded) << slow.status().ToString();
  auto next = c.Execute("query-status");
  ASSERT_FALSE(next.ok());
  EXPECT_NE(next.status().message().find("out of step"), std::string::npos);
}

TEST(QmpClient, MalformedAndClosedPeersAreErrors) {
  FakeQemu q({"not json"});
  QmpClient c(q.TakeClient());
  ASSERT_TRUE(c.Handshake(2000).ok() == false);
}

}  // namespace
}  // namespace space::runtime::vm
