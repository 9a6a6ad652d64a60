#include "runtime/ns/userns.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "common/syscall.h"

namespace space::runtime::ns {

Status WriteIdMaps(pid_t pid, uint32_t uid_base, uint32_t count) {
  const std::string proc = "/proc/" + std::to_string(pid);
  const std::string line = "0 " + std::to_string(uid_base) + " " + std::to_string(count) + "\n";
  // The map must be written in one write() call; WriteSmallFile does exactly one.
  RETURN_IF_ERROR(WriteSmallFile(proc + "/uid_map", line));
  RETURN_IF_ERROR(WriteSmallFile(proc + "/gid_map", line));
  return Status::Ok();
}

Result<UniqueFd> OpenUserNs(pid_t pid) {
  return OpenFd("/proc/" + std::to_string(pid) + "/ns/user", O_RDONLY);
}

int ChildBecomeRoot(Call* call) {
  // Host root's supplementary groups are unmapped inside; drop them.
  *call = Call::kSetgroups;
  if (::syscall(SYS_setgroups, 0, nullptr) != 0) return errno;
  *call = Call::kSetresgid;
  if (::syscall(SYS_setresgid, 0, 0, 0) != 0) return errno;
  // Capabilities survive: the old euid (host 0) is not root of this namespace, so the
  // kernel's setuid fixup treats this as a transition *to* root and keeps them.
  *call = Call::kSetresuid;
  if (::syscall(SYS_setresuid, 0, 0, 0) != 0) return errno;
  *call = Call::kNone;
  return 0;
}

}  // namespace space::runtime::ns
