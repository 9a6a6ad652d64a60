#include "common/helper_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/syscall.h"

namespace space {
namespace {

constexpr size_t kMaxHelperFds = 8;

}  // namespace

Result<pid_t> SpawnHelper(const HelperSpec& spec) {
  if (spec.args.empty() || spec.fds.size() > kMaxHelperFds) return InvalidArgument("helper: bad spawn spec");
  for (const auto& [from, to] : spec.fds) {
    if (from < 0 || to < 3 || to >= 10) return InvalidArgument("helper: descriptor numbers out of range");
  }
  // Everything the child uses is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> args = spec.args;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string path = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {path.data(), nullptr};
  int keep[3 + kMaxHelperFds] = {0, 1, 2};
  size_t nkeep = 3;
  for (const auto& fd : spec.fds) keep[nkeep++] = fd.second;
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", args[0] + " " + (args.size() > 1 ? args[1] : ""), errno);
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // the forking thread may block SIGTERM
    if (spec.ignore_stop_signals) {
      ::signal(SIGINT, SIG_IGN);
      ::signal(SIGTERM, SIG_IGN);
    }
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    // Each descriptor goes to its number via one >= 10, so no dup2 clobbers another; then
    // everything else is closed, CLOEXEC or not: nothing of the node leaks into the helper.
    int moved[kMaxHelperFds];
    for (size_t i = 0; i < spec.fds.size(); ++i) {
      moved[i] = ::fcntl(spec.fds[i].first, F_DUPFD, 10);
      if (moved[i] < 0) ::_exit(126);
    }
    for (size_t i = 0; i < spec.fds.size(); ++i) {
      if (::dup2(moved[i], spec.fds[i].second) != spec.fds[i].second) ::_exit(126);
    }
    if (CloseFdsExcept(keep, nkeep) != 0) ::_exit(126);
    ::execve("/proc/self/exe", argv.data(), envp);
    ::_exit(127);
  }
  return pid;
}

}  // namespace space
