#include "runtime/ns/userns.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "common/syscall.h"

namespace space::runtime::ns {
std::string UidMapText(IdMapShape shape, uint32_t uid_base) {
  const std::string base = std::to_string(uid_base);
  return shape == IdMapShape::kSandbox ? "0 " + base + " 65536\n" : base + " " + base + " 1\n";
}

std::string GidMapText(IdMapShape shape, uint32_t uid_base, gid_t kvm_gid) {
  std::string map = UidMapText(shape, uid_base);
  if (shape == IdMapShape::kOneId && kvm_gid != 0) {
    map += std::to_string(kvm_gid) + " " + std::to_string(kvm_gid) + " 1\n";
  }
  return map;
}

Status MapIds(PrivilegedActs* acts, const IdMapRequest& request) {
  if (acts != nullptr) return acts->MapUserns(request).Annotate("map the user namespace's ids");
  return WriteIdMaps(request.pid, UidMapText(request.shape, request.uid_base),
                     GidMapText(request.shape, request.uid_base, request.kvm_gid));
}

Status WriteIdMaps(pid_t pid, const std::string& uid_map, const std::string& gid_map) {
  const std::string proc = "/proc/" + std::to_string(pid);
  // A map must be written in one write() call; WriteSmallFile does exactly one.
  RETURN_IF_ERROR(WriteSmallFile(proc + "/uid_map", uid_map));
  RETURN_IF_ERROR(WriteSmallFile(proc + "/gid_map", gid_map));
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
