#include "common/kill_child.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <memory>
#include <string>

#include "common/syscall.h"
#include "common/unique_fd.h"

namespace space {
Status KillChild(PrivilegedActs* acts, int pidfd) {
  if (::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0) == 0 || errno == ESRCH) return Status::Ok();
  const int err = errno;
  if (err != EPERM || acts == nullptr) return ErrnoStatus("pidfd_send_signal", "SIGKILL to a child", err);
  Status st = acts->KillChild(pidfd);
  if (st.code() == StatusCode::kNotFound) return Status::Ok();  // it exited meanwhile
  return st.Annotate("kill a child");
}

Status KillChildPid(PrivilegedActs* acts, pid_t pid) {
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (pidfd.valid()) return KillChild(acts, pidfd.get());
  if (errno == ESRCH) return Status::Ok();
  // No descriptor to hand on (out of descriptors): only a kill this process may send itself.
  if (::kill(pid, SIGKILL) == 0 || errno == ESRCH) return Status::Ok();
  return ErrnoStatus("kill", "SIGKILL to child " + std::to_string(pid), errno);
}

}  // namespace space
