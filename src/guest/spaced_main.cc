// spaced: PID 1 of a sandbox. Serves the node over the channel on fd 3 (protocol.h).
//
// Also runs as an ordinary process (tests): then it becomes a child subreaper instead of
// relying on being init, and never signals processes it did not start.
#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/log.h"
#include "common/status.h"
#include "guest/event_loop.h"
#include "guest/vm_init.h"
#include "protocol/protocol.h"

extern char** environ;

namespace {

// Spawned processes get fds 0-2 by dup2 from pipe ends; if spaced's own 0-2 were closed,
// a pipe could land there and be clobbered. Fill any gap with /dev/null (or "/" when the
// sandbox has no /dev/null: any fd will do as a placeholder).
void EnsureStdioOpen() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    int got = ::open("/dev/null", O_RDWR);
    if (got < 0) got = ::open("/", O_RDONLY);
    (void)got;  // the lowest free fd: this one
  }
}

}  // namespace

int main() {
  using space::guest::kChannelFd;
  EnsureStdioOpen();
  // Asked before the boot, which clears SPACE_VM from the environment.
  const bool in_vm = space::guest::StartedInVm();
  if (in_vm) {
    // In a microVM spaced starts from the initramfs and makes its own root and channel.
    if (space::Status st = space::guest::BootFromInitramfs(); !st.ok()) {
      space::LogError("spaced", "vm boot: " + st.ToString());
      return 1;
    }
  }
  // A write to a process whose stdin is closed must fail with EPIPE, not kill PID 1.
  ::signal(SIGPIPE, SIG_IGN);
  if (::fcntl(kChannelFd, F_GETFD) < 0) {
    space::LogError("spaced", "no channel on fd 3");
    return 1;
  }
  // Nothing spaced inherited beyond the channel may leak into sandbox processes.
  // Errors ignored: CLOSE_RANGE_CLOEXEC needs Linux 5.11.
  ::close_range(kChannelFd + 1, ~0U, CLOSE_RANGE_CLOEXEC);
  const bool is_init = ::getpid() == 1;
  if (!is_init) ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  ::umask(022);

  space::guest::ExecContext ctx;
  ctx.configures_network = in_vm;
  ctx.root_keeps_sys_admin = in_vm;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) ctx.inherited_env.emplace_back(*e);

  auto daemon = space::guest::GuestDaemon::Create(space::UniqueFd(kChannelFd), std::move(ctx));
  if (!daemon.ok()) {
    space::LogError("spaced", daemon.status().ToString());
    if (is_init) ::kill(-1, SIGKILL);
    return 1;
  }
  space::Status st = (*daemon)->Run();
  if (!st.ok()) space::LogError("spaced", "channel closed: " + st.ToString());
  daemon->reset();  // kills the process groups it started
  // The sandbox dies with its node: take every remaining process down with it.
  if (is_init) ::kill(-1, SIGKILL);
  return st.ok() ? 0 : 1;
}
