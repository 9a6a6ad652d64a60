#include "gateway/worker_seccomp.h"

#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "common/filtered_child_test_util.h"

namespace space::gateway {
namespace {

// The test runs as root, so each refused call would succeed unfiltered.
int InFilteredChild(const std::function<int()>& body) {
  return testing::InRestrictedChild(LoadWorkerSeccomp, body);
}

TEST(WorkerSeccompTest, RefusesWaysOutOfTheWorker) {
  // A process the filtered child could trace and signal unfiltered. Made and ended here, by
  // the unfiltered test: left to the child, it could outlive the test and hold ctest's pipe.
  pid_t sibling = ::fork();
  ASSERT_GE(sibling, 0);
  if (sibling == 0) {
    ::pause();
    ::_exit(0);
  }
  int code = InFilteredChild([sibling]() -> int {
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    if (::execve("/bin/true", argv, nullptr) == 0 || errno != EPERM) return 1;
    if (::unshare(CLONE_NEWNET) == 0 || errno != EPERM) return 2;
    if (::unshare(CLONE_NEWUSER) == 0 || errno != EPERM) return 3;
    if (::mount("none", "/mnt", "tmpfs", 0, nullptr) == 0 || errno != EPERM) return 4;
    if (::ptrace(PTRACE_ATTACH, sibling, nullptr, nullptr) == 0 || errno != EPERM) return 5;
    if (::kill(sibling, SIGKILL) == 0 || errno != EPERM) return 11;
    if (::kill(::getppid(), 0) == 0 || errno != EPERM) return 6;
    if (::socket(AF_NETLINK, SOCK_RAW, 0) >= 0 || errno != EAFNOSUPPORT) return 7;
    if (::socket(AF_PACKET, SOCK_RAW, 0) >= 0 || errno != EAFNOSUPPORT) return 8;
    if (::chroot("/") == 0 || errno != EPERM) return 9;
    return 0;
  });
  ::kill(sibling, SIGKILL);
  ::waitpid(sibling, nullptr, 0);
  EXPECT_EQ(code, 0) << "the numbered check in the child failed";
}

TEST(WorkerSeccompTest, LeavesWhatTheGatewayNeeds) {
  int code = InFilteredChild([]() -> int {
    int tcp = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int udp = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (tcp < 0 || udp < 0) return 1;
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) return 2;
    bool ran = false;
    std::thread([&] { ran = true; }).join();  // threads: clone with CLONE_THREAD, or clone3's fallback
    if (!ran) return 3;
    if (::kill(::getpid(), 0) != 0) return 4;  // signals to itself
    return 0;
  });
  EXPECT_EQ(code, 0) << "the numbered check in the child failed";
}

}  // namespace
}  // namespace space::gateway
