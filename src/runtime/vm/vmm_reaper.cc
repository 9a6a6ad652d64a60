#include "runtime/vm/vmm_reaper.h"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "common/syscall.h"
#include "common/unique_fd.h"

namespace space::runtime::vm {

int RunVmmReaper(int alive_fd, pid_t qemu_pid) {
  if (::getpid() != 1) return 2;
  UniqueFd qemu(static_cast<int>(::syscall(SYS_pidfd_open, qemu_pid, 0)));
  if (!qemu.valid()) return 2;
  pollfd fds[2] = {{alive_fd, POLLIN, 0}, {qemu.get(), POLLIN, 0}};
  for (;;) {
    if (RetryEintr([&] { return ::poll(fds, 2, -1); }) < 0) return 2;
    // Nothing is ever written to the pipe: any event on it is the node's end closing.
    if (fds[0].revents != 0) return 0;
    if (fds[1].revents != 0) break;
  }
  int status = 0;
  if (RetryEintr([&] { return ::waitpid(qemu_pid, &status, 0); }) != qemu_pid) return 2;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace space::runtime::vm
