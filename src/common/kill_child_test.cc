#include "common/kill_child.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "common/capabilities.h"
#include "common/datagram.h"
#include "common/fake_privileged_acts.h"
#include "common/unique_fd.h"

namespace space {
namespace {

// A child that sleeps under `uid`; returns once it runs under it.
pid_t StartSleeper(uid_t uid) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    if (uid != ::getuid() && ::setresuid(uid, uid, uid) != 0) ::_exit(9);
    (void)!::write(p[1], "r", 1);
    ::pause();
    ::_exit(0);
  }
  ::close(p[1]);
  char c;
  if (pid > 0 && ::read(p[0], &c, 1) != 1) pid = -1;
  ::close(p[0]);
  return pid;
}

bool KilledBySigkill(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

TEST(KillChildTest, KillsItsOwnChildWithoutTheBroker) {
  FakePrivilegedActs acts;  // any act through it would fail the kill
  pid_t pid = StartSleeper(::getuid());
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(KillChildPid(&acts, pid).ok());
  EXPECT_TRUE(KilledBySigkill(pid));
  // Reaped: nothing left to kill, which is not an error.
  EXPECT_TRUE(KillChildPid(nullptr, pid).ok());
}

// As a node that gave CAP_KILL away: a child under another uid is out of its own reach, and
// the kill goes to its PrivilegedActs, with the child's pidfd. The "node" is a forked child
// without CAP_KILL; the test process, which keeps it, plays the broker at the other end.
TEST(KillChildTest, WithoutCapKillAChildOfAnotherUidGoesToTheBroker) {
  if (::geteuid() != 0 || !HasEffectiveCapability(CAP_SETPCAP)) GTEST_SKIP() << "needs root";
  constexpr DatagramLimits kLimits{64, 1, "test broker"};
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd broker_end(sv[0]), node_end(sv[1]);
  pid_t node = ::fork();
  ASSERT_GE(node, 0);
  if (node == 0) {
    broker_end.reset();
    pid_t child = StartSleeper(65534);
    if (child <= 0) ::_exit(1);
    if (!DropCapabilities({CAP_KILL}).ok()) ::_exit(2);
    if (::kill(child, 0) == 0 || KillChildPid(nullptr, child).ok()) ::_exit(3);  // EPERM, nowhere to go
    auto to_broker = [&](int pidfd) -> Status {
      RETURN_IF_ERROR(SendDatagram(node_end.get(), "kill", {pidfd}, kLimits));
      ASSIGN_OR_RETURN(Datagram reply, ReceiveDatagram(node_end.get(), kLimits));
      return reply.bytes == "ok" ? Status::Ok() : Unavailable(reply.bytes);
    };
    FakePrivilegedActs acts;
    acts.kill_child = to_broker;
    if (!KillChildPid(&acts, child).ok()) ::_exit(4);
    int status = 0;
    if (::waitpid(child, &status, 0) != child || !WIFSIGNALED(status)) ::_exit(5);
    pid_t second = StartSleeper(65534);
    if (second <= 0) ::_exit(1);
    acts.kill_child = [](int) { return NotFound("exited"); };
    if (!KillChildPid(&acts, second).ok()) ::_exit(6);  // "gone meanwhile" counts as done
    acts.kill_child = [](int) { return Unavailable("the broker is gone"); };
    if (KillChildPid(&acts, second).code() != StatusCode::kUnavailable) ::_exit(7);
    acts.kill_child = to_broker;
    if (!KillChildPid(&acts, second).ok()) ::_exit(4);
    if (::waitpid(second, &status, 0) != second || !WIFSIGNALED(status)) ::_exit(5);
    ::_exit(0);
  }
  node_end.reset();
  int kills = 0;
  for (;;) {
    Result<Datagram> d = ReceiveDatagram(broker_end.get(), kLimits);
    if (!d.ok()) break;
    if (d->bytes == "kill" && d->fds.size() == 1) {
      ++kills;
      ASSERT_EQ(::syscall(SYS_pidfd_send_signal, d->fds[0].get(), SIGKILL, nullptr, 0), 0);
      ASSERT_TRUE(SendDatagram(broker_end.get(), "ok", {}, kLimits).ok());
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(node, &status, 0), node);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: no sleeper, 2: drop failed, 3: no EPERM, 4: broker failed, 5: not killed, 6: exited is an "
         "error, 7: error lost";
  EXPECT_EQ(kills, 2);
}

}  // namespace
}  // namespace space
