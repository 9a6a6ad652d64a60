#include "common/capabilities.h"

#include <linux/capability.h>
#include <sys/wait.h>
#include <unistd.h>

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

}  // namespace
}  // namespace space
