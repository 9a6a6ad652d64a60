#include "common/nice.h"

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "common/capabilities.h"
#include "common/fake_privileged_acts.h"
#include "common/unique_fd.h"

namespace space {
namespace {

// Runs `body` in a forked child without CAP_SYS_NICE; its exit code is the test's verdict.
int InChildWithoutSysNice(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!DropCapabilities({CAP_SYS_NICE}).ok()) ::_exit(90);
    ::_exit(body());
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(NiceTest, RaisesLocallyAndLowersOnlyThroughTheBroker) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (drops CAP_SYS_NICE)";
  int code = InChildWithoutSysNice([] {
    FakePrivilegedActs acts;
    if (!SetThreadNice(&acts, 10).ok() || ::getpriority(PRIO_PROCESS, 0) != 10) return 1;  // a raise: no privilege
    if (SetThreadNice(nullptr, 0).ok()) return 2;  // a lowering without the broker: the kernel refuses
    if (::getpriority(PRIO_PROCESS, 0) != 10) return 3;
    pid_t asked_tid = 0;
    int asked_nice = -1;
    acts.thread_nice = [&](pid_t tid, int nice) {
      asked_tid = tid;
      asked_nice = nice;
      return Status::Ok();
    };
    if (!SetThreadNice(&acts, 0).ok() || asked_tid != ::gettid() || asked_nice != 0) return 4;
    acts.thread_nice = [](pid_t, int) { return PermissionDenied("no"); };
    Status st = SetThreadNice(&acts, 0);
    if (st.code() != StatusCode::kPermissionDenied) return 5;
    if (SetThreadNice(&acts, -1).code() != StatusCode::kInvalidArgument || SetThreadNice(&acts, 20).ok()) return 6;
    return 0;
  });
  EXPECT_EQ(code, 0);
}

TEST(NiceTest, ChildUnderAnotherUidGoesThroughTheBroker) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a child under another uid)";
  int code = InChildWithoutSysNice([] {
    pid_t child = ::fork();
    if (child == 0) {
      if (::setresuid(65534, 65534, 65534) != 0) ::_exit(9);
      ::pause();
      ::_exit(0);
    }
    ::usleep(50000);  // its setresuid first
    UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, child, 0)));
    int verdict = 0;
    if (SetChildNice(nullptr, pidfd.get(), child, 5).ok()) verdict = 1;  // another uid: refused here
    int asked_fd = -1;
    FakePrivilegedActs acts;
    acts.child_nice = [&](int fd, int nice) {
      asked_fd = fd;
      return nice == 5 ? Status::Ok() : InvalidArgument("nice");
    };
    if (verdict == 0 && (!SetChildNice(&acts, pidfd.get(), child, 5).ok() || asked_fd != pidfd.get())) verdict = 2;
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    return verdict;
  });
  EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace space
