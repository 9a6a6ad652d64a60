#include "common/syscall.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

namespace space {
namespace {

// Receives up to `len` bytes and the one fd riding with them (-1 when none came).
int RecvWithFd(int sock, char* buf, size_t len, ssize_t* got) {
  iovec iov{buf, len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  *got = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (*got <= 0 || c == nullptr || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

TEST(SyscallTest, SendWithFdPassesTheFdWithTheData) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd a(sv[0]), b(sv[1]);
  UniqueFd passed(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(passed);
  Result<size_t> sent = SendWithFd(a.get(), "hello", passed.get());
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  EXPECT_EQ(*sent, 5u);
  char buf[16];
  ssize_t got = 0;
  UniqueFd received(RecvWithFd(b.get(), buf, sizeof buf, &got));
  ASSERT_EQ(got, 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  ASSERT_TRUE(received);
  struct stat x, y;
  ASSERT_EQ(::fstat(passed.get(), &x), 0);
  ASSERT_EQ(::fstat(received.get(), &y), 0);
  EXPECT_EQ(x.st_ino, y.st_ino);
  EXPECT_EQ(x.st_dev, y.st_dev);

  EXPECT_EQ(SendWithFd(a.get(), "", passed.get()).status().code(), StatusCode::kInvalidArgument);
  b.reset();  // a closed peer is an error, not SIGPIPE
  EXPECT_FALSE(SendWithFd(a.get(), "x", passed.get()).ok());
}

}  // namespace
}  // namespace space
