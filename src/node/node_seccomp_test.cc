#include "node/node_seccomp.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include <seccomp.h>

#include "common/filtered_child_test_util.h"
#include "common/seccomp_denylist.h"

namespace space::node {
namespace {

int InFilteredChild(const std::function<int()>& body) {
  return testing::InRestrictedChild(LoadNodeSeccomp, body);
}

bool Refused(long rc) { return rc < 0 && errno == EPERM; }

TEST(NodeSeccompTest, RefusesTheKernelSurfacesRootWouldStillHave) {
  int code = InFilteredChild([]() -> int {
    bpf_attr attr;
    std::memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    if (!Refused(::syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr))) return 1;
    perf_event_attr pe;
    std::memset(&pe, 0, sizeof pe);
    pe.size = sizeof pe;
    pe.type = PERF_TYPE_SOFTWARE;
    pe.config = PERF_COUNT_SW_CPU_CLOCK;
    if (!Refused(::syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0))) return 2;
    if (!Refused(::syscall(SYS_io_uring_setup, 1, nullptr))) return 3;
    if (!Refused(::syscall(SYS_userfaultfd, 0))) return 4;
    if (!Refused(::syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0))) return 5;
    if (!Refused(::syscall(SYS_open_by_handle_at, AT_FDCWD, nullptr, O_RDONLY))) return 6;
    if (!Refused(::syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, nullptr, 0))) return 7;
    return 0;
  });
  EXPECT_EQ(code, 0) << "the numbered check in the child failed";
}

// Every call of the list, with arguments no kernel would act on (-1 everywhere: bad
// pointers, descriptors and magic numbers), is EPERM: the filter answers before the kernel
// looks at them. Unfiltered, each answers something else (EFAULT, EINVAL, EBADF, ...).
TEST(NodeSeccompTest, RefusesEveryCallOfItsList) {
  const std::vector<const char*> names = KernelSurfaceSyscalls();
  int code = InFilteredChild([&]() -> int {
    for (size_t i = 0; i < names.size(); ++i) {
      const int nr = seccomp_syscall_resolve_name(names[i]);
      if (nr < 0) continue;  // not a call of this architecture
      if (!Refused(::syscall(nr, -1L, -1L, -1L, -1L, -1L, -1L))) return static_cast<int>(i) + 1;
    }
    return 0;
  });
  EXPECT_EQ(code, 0) << "not refused: " << (code > 0 ? names[code - 1] : "?");
  EXPECT_GT(names.size(), 30u);
  // The control: without the filter, the same calls are mostly not EPERM (the kernel refuses
  // their arguments), so the EPERMs above are the filter's.
  int unfiltered_eperm =
      testing::InRestrictedChild([] { return Status::Ok(); },
                                 [&]() -> int {
                                   int eperm = 0;
                                   for (const char* name : names) {
                                     const int nr = seccomp_syscall_resolve_name(name);
                                     if (nr >= 0 && Refused(::syscall(nr, -1L, -1L, -1L, -1L, -1L, -1L))) ++eperm;
                                   }
                                   return eperm;
                                 });
  EXPECT_LT(unfiltered_eperm, static_cast<int>(names.size()) / 2);
}

TEST(NodeSeccompTest, LeavesWhatTheNodeAndItsChildrenDo) {
  int code = InFilteredChild([]() -> int {
    // New namespaces, as a sandbox launch makes them (a user namespace needs no privilege).
    // First, while this process has one thread: unshare(CLONE_NEWUSER) is EINVAL in a
    // multithreaded process, and a joined thread may not have left the thread group yet
    // (join returns when the kernel clears its tid, before it is released; seen in CI).
    if (::unshare(CLONE_NEWUSER) != 0) return 4;
    // Programs (template builds, QEMU), threads, signals to other processes.
    pid_t child = ::fork();
    if (child == 0) {
      char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
      ::execve("/bin/true", argv, nullptr);
      ::_exit(127);
    }
    int status = 0;
    if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    bool ran = false;
    std::thread([&] { ran = true; }).join();
    if (!ran) return 2;
    if (::kill(::getppid(), 0) != 0) return 3;
    return 0;
  });
  EXPECT_EQ(code, 0) << "the numbered check in the child failed";
}

}  // namespace
}  // namespace space::node
