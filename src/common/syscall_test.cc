#include "common/syscall.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

// In a forked child (the fd table is the test process's own otherwise): opens fds, keeps a
// scattered, unsorted, duplicated set and reports through the exit code which fds survived.
TEST(SyscallTest, CloseFdsExceptKeepsExactlyTheListedFds) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fds[8];
    for (int& fd : fds) fd = ::open("/dev/null", O_RDONLY);  // not CLOEXEC: must be closed anyway
    for (int fd : fds) {
      if (fd < 0) ::_exit(100);
    }
    int keep[] = {fds[5], -1, 2, fds[1], fds[5], 0, fds[7]};
    if (CloseFdsExcept(keep, sizeof keep / sizeof keep[0]) != 0) ::_exit(101);
    int code = 0;
    auto open_fd = [](int fd) { return ::fcntl(fd, F_GETFD) >= 0; };
    if (!open_fd(0) || !open_fd(2) || !open_fd(fds[1]) || !open_fd(fds[5]) || !open_fd(fds[7])) code |= 1;
    if (open_fd(1) || open_fd(fds[0]) || open_fd(fds[2]) || open_fd(fds[6])) code |= 2;
    if (open_fd(fds[7] + 1) || open_fd(1000)) code |= 4;
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: a kept fd was closed, 2: a dropped fd survived, 4: above";
}

}  // namespace
}  // namespace space
