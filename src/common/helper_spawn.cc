#include "common/helper_spawn.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

#include "common/syscall.h"
#include "common/unique_fd.h"

namespace space {
namespace {

constexpr size_t kMaxHelperFds = 8;

}  // namespace

Result<pid_t> SpawnHelper(const HelperSpec& spec) {
  if (spec.args.empty() || spec.fds.size() > kMaxHelperFds) return InvalidArgument("helper: bad spawn spec");
  for (const auto& [from, to] : spec.fds) {
    if (from < 0 || to < 3 || to >= 10) return InvalidArgument("helper: descriptor numbers out of range");
  }
  const bool own_user = static_cast<bool>(spec.user.map_ids);
  const bool ns_root = own_user && spec.user.root_in_namespace;
  if (own_user && !ns_root && spec.user.uid == 0) {
    return InvalidArgument("helper: a user namespace of its own needs a uid other than 0");
  }
  UniqueFd go_r, go_w;
  if (own_user) {
    int go[2];
    if (::pipe2(go, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", "helper go", errno);
    go_r.reset(go[0]);
    go_w.reset(go[1]);
  }
  // Everything the child uses is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> args = spec.args;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  env.insert(env.end(), spec.env.begin(), spec.env.end());
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int keep[4 + kMaxHelperFds] = {0, 1, 2};
  size_t nkeep = 3;
  for (const auto& fd : spec.fds) keep[nkeep++] = fd.second;
  const pid_t parent = ::getpid();
  const int go_fd = go_r.get();
  const int go_w_fd = go_w.get();
  const uid_t uid = ns_root ? 0 : spec.user.uid;
  const int exe_fd = spec.exe_fd;
  int pidfd = -1;
  pid_t pid;
  if (own_user) {
    // A raw clone3 (glibc's fork takes no flags): the child makes no call that is not a
    // syscall, so the atfork handlers it skips are not missed.
    clone_args ca{};
    ca.flags = CLONE_NEWUSER | CLONE_PIDFD;
    ca.pidfd = reinterpret_cast<uintptr_t>(&pidfd);
    ca.exit_signal = SIGCHLD;
    pid = static_cast<pid_t>(::syscall(SYS_clone3, &ca, sizeof ca));
  } else {
    pid = ::fork();
  }
  if (pid < 0) return ErrnoStatus("fork", args[0] + " " + (args.size() > 1 ? args[1] : ""), errno);
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // the forking thread may block SIGTERM
    if (spec.ignore_stop_signals) {
      ::signal(SIGINT, SIG_IGN);
      ::signal(SIGTERM, SIG_IGN);
    }
    if (own_user) {
      // Mapped once the parent says go (EOF: it gave up on us, or died). The write end is
      // closed here first: held by this process too, a parent killed before its go would
      // leave the read waiting forever, an orphan holding the node's descriptors (the pool
      // busy). Raw syscalls: glibc's set*id would signal the parent's threads, which do not
      // exist here.
      ::close(go_w_fd);
      char go = 0;
      if (::read(go_fd, &go, 1) != 1) ::_exit(125);
      // The bounding set, while this process still holds CAP_SETPCAP (in its namespace): after
      // exec it could not, and a full one would show as if privilege remained. A namespace
      // root keeps it: its capabilities reach only its own namespaces and its mapped ids.
      for (int cap = 0; cap < 64 && !ns_root; ++cap) {
        if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) ::_exit(123);
      }
      if (::syscall(SYS_setgroups, 0, nullptr) != 0 || ::syscall(SYS_setresgid, uid, uid, uid) != 0 ||
          ::syscall(SYS_setresuid, uid, uid, uid) != 0) {
        ::_exit(124);
      }
    }
    // After any id change, which clears it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    // Each descriptor goes to its number via one >= 10, so no dup2 clobbers another; then
    // everything else is closed, CLOEXEC or not: nothing of the node leaks into the helper.
    int moved[kMaxHelperFds];
    for (size_t i = 0; i < spec.fds.size(); ++i) {
      moved[i] = ::fcntl(spec.fds[i].first, F_DUPFD, 10);
      if (moved[i] < 0) ::_exit(126);
    }
    int exe = -1;
    if (exe_fd >= 0) {
      exe = ::fcntl(exe_fd, F_DUPFD_CLOEXEC, 10);  // closed by the exec itself
      if (exe < 0) ::_exit(126);
      keep[nkeep++] = exe;
    }
    for (size_t i = 0; i < spec.fds.size(); ++i) {
      if (::dup2(moved[i], spec.fds[i].second) != spec.fds[i].second) ::_exit(126);
    }
    if (CloseFdsExcept(keep, nkeep) != 0) ::_exit(126);
    if (exe >= 0) {
      ::fexecve(exe, argv.data(), envp.data());
    } else {
      ::execve("/proc/self/exe", argv.data(), envp.data());
    }
    ::_exit(127);
  }
  if (own_user) {
    UniqueFd child(pidfd);
    go_r.reset();
    Status st = spec.user.map_ids(child.get(), pid);
    if (st.ok()) st = WriteAll(go_w.get(), "g", 1);
    if (!st.ok()) {
      // This process owns the child's user namespace, so it may kill it whatever its uid.
      ::syscall(SYS_pidfd_send_signal, child.get(), SIGKILL, nullptr, 0);
      (void)RetryEintr([&] { return ::waitpid(pid, nullptr, 0); });
      return st.Annotate(args[0] + " " + (args.size() > 1 ? args[1] : ""));
    }
  }
  return pid;
}

}  // namespace space
