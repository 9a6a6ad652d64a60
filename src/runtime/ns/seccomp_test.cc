// The seccomp filter, loaded in a forked child. Needs no privilege (no_new_privs).
#include "runtime/ns/seccomp.h"

#include <linux/btrfs.h>
#include <linux/keyctl.h>
#include <sys/ioctl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <gtest/gtest.h>

namespace space::runtime::ns {
namespace {

struct Case {
  const char* name;
  long (*call)();
  int want_errno;  // 0: the call must not be refused by the filter
};

const Case kCases[] = {
    {"keyctl", [] { return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0); },
     EPERM},
    {"bpf", [] { return syscall(SYS_bpf, 0, nullptr, 0); }, EPERM},
    {"clone3", [] { return syscall(SYS_clone3, nullptr, 0); }, ENOSYS},
    {"unshare(CLONE_NEWUSER)", [] { return static_cast<long>(unshare(CLONE_NEWUSER)); }, EPERM},
    {"open_tree", [] { return syscall(SYS_open_tree, -1, "/", 0); }, EPERM},
    {"perf_event_open", [] { return syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0); }, EPERM},
    // On a non-btrfs fd these would fail with ENOTTY; the filter answers first.
    {"btrfs subvol create", [] { return static_cast<long>(ioctl(0, BTRFS_IOC_SUBVOL_CREATE, nullptr)); }, EPERM},
    {"btrfs snap create v2", [] { return static_cast<long>(ioctl(0, BTRFS_IOC_SNAP_CREATE_V2, nullptr)); }, EPERM},
    {"other ioctl", [] { return static_cast<long>(ioctl(0, FIONREAD, nullptr)); }, 0},
    {"getpid", [] { return static_cast<long>(getpid()); }, 0},
    // Namespace flags other than CLONE_NEWUSER pass the filter; unshare(0) is a no-op.
    {"unshare(0)", [] { return static_cast<long>(unshare(0)); }, 0},
};

TEST(NsRuntimeSeccompTest, RefusesListedSyscalls) {
  Result<std::vector<sock_filter>> prog = BuildSeccompFilter();
  ASSERT_TRUE(prog.ok()) << prog.status().ToString();
  ASSERT_FALSE(prog->empty());
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      sock_fprog fprog{static_cast<unsigned short>(prog->size()), prog->data()};
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ChildLoadSeccomp(&fprog) != 0) _exit(100);
      errno = 0;
      long rc = c.call();
      // Exit code: 0 if the call succeeded, else its errno (all < 100).
      _exit(rc >= 0 ? 0 : errno);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    if (c.want_errno != 0) {
      EXPECT_EQ(WEXITSTATUS(status), c.want_errno);
    } else {
      EXPECT_NE(WEXITSTATUS(status), EPERM);
      EXPECT_NE(WEXITSTATUS(status), 100);
    }
  }
}

}  // namespace
}  // namespace space::runtime::ns
