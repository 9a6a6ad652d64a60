#include "common/byte_relay.h"

#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "common/unique_fd.h"

namespace space {
namespace {

std::string ReadToEof(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

TEST(RelayBytesTest, CopiesBothWaysAndPropagatesHalfCloses) {
  int x[2], y[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, x), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, y), 0);
  UniqueFd client(x[0]), a(x[1]), b(y[0]), server(y[1]);
  RelayStats stats;
  std::thread relay([&] { stats = RelayBytes(a.get(), b.get(), "GET / ", "", 5000); });
  const std::string big(300 * 1024, 'q');  // more than one buffer and one socket buffer
  std::thread writer([&] {
    ASSERT_EQ(::write(client.get(), big.data(), big.size()), static_cast<ssize_t>(big.size()));
    ::shutdown(client.get(), SHUT_WR);
  });
  EXPECT_EQ(ReadToEof(server.get()), "GET / " + big);  // the client's end arrives as EOF
  writer.join();
  ASSERT_EQ(::write(server.get(), "pong", 4), 4);
  ::shutdown(server.get(), SHUT_WR);
  EXPECT_EQ(ReadToEof(client.get()), "pong");
  relay.join();
  EXPECT_EQ(stats.a_to_b, big.size() + 6);
  EXPECT_EQ(stats.b_to_a, 4u);
}

TEST(RelayBytesTest, EndsWhenIdle) {
  int x[2], y[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, x), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, y), 0);
  UniqueFd client(x[0]), a(x[1]), b(y[0]), server(y[1]);
  RelayStats stats = RelayBytes(a.get(), b.get(), "", "", 100);  // returns without any traffic
  EXPECT_EQ(stats.a_to_b + stats.b_to_a, 0u);
}

}  // namespace
}  // namespace space
