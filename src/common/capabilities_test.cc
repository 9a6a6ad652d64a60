#include "common/capabilities.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace space {
namespace {

TEST(CapabilitiesTest, LastCapabilityIsWhatTheKernelSays) {
  EXPECT_GE(LastCapability(), CAP_AUDIT_READ);  // 37, Linux 3.16
  EXPECT_LT(LastCapability(), 64);
}

// In a forked child, so the test process keeps its capabilities.
TEST(CapabilitiesTest, DropRemovesFromEverySetAndKeepsTheRest) {
  if (::geteuid() != 0 || !HasEffectiveCapability(CAP_SETPCAP)) GTEST_SKIP() << "needs root";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!DropCapabilities({CAP_SYS_MODULE, CAP_SYS_TIME, 63}).ok()) ::_exit(1);  // 63: unknown, skipped
    if (InBoundingSet(CAP_SYS_MODULE) || InBoundingSet(CAP_SYS_TIME)) ::_exit(2);
    if (HasEffectiveCapability(CAP_SYS_MODULE) || HasEffectiveCapability(CAP_SYS_TIME)) ::_exit(3);
    if (!InBoundingSet(CAP_SYS_ADMIN) || !HasEffectiveCapability(CAP_SYS_ADMIN)) ::_exit(4);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: drop failed, 2: still bounding, 3: still effective, 4: kept one lost";
}

// The node's switch to its own uid (daemon/dev.cc): ids all changed, no groups, the permitted
// set effective again, and only the named capability inheritable. In a forked child.
TEST(CapabilitiesTest, BecomeUserKeepsPermittedCapabilitiesEffective) {
  if (::geteuid() != 0 || !HasEffectiveCapability(CAP_SETUID)) GTEST_SKIP() << "needs root";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!DropCapabilities({CAP_SYS_MODULE}).ok()) ::_exit(1);
    if (!BecomeUserKeepingCapabilities(4242, 4243, {CAP_DAC_READ_SEARCH}).ok()) ::_exit(2);
    uid_t r, e, s;
    gid_t gr, ge, gs;
    if (::getresuid(&r, &e, &s) != 0 || r != 4242 || e != 4242 || s != 4242) ::_exit(3);
    if (::getresgid(&gr, &ge, &gs) != 0 || gr != 4243 || ge != 4243 || gs != 4243) ::_exit(3);
    if (::getgroups(0, nullptr) != 0) ::_exit(4);
    if (!HasEffectiveCapability(CAP_DAC_READ_SEARCH) || !HasEffectiveCapability(CAP_SETPCAP)) ::_exit(5);
    if (HasEffectiveCapability(CAP_SYS_MODULE)) ::_exit(6);
    // The ambient raise a tool's child makes (common/subprocess.h) works for the inheritable
    // one only.
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_DAC_READ_SEARCH, 0, 0) != 0) ::_exit(7);
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0) == 0) ::_exit(8);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: switch failed, 3: ids, 4: groups, 5: a kept capability lost, 6: a dropped "
                                       "one back, 7/8: inheritable set wrong";
}

// More than one thread: refused, since capabilities are per thread.
TEST(CapabilitiesTest, BecomeUserRefusesAThreadedProcess) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  // gtest's own process may be threaded or not; a thread of ours makes sure.
  std::thread t([] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
  Status st = BecomeUserKeepingCapabilities(4242, 4242, {});
  t.join();
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(::geteuid(), 0u);
}

}  // namespace
}  // namespace space
