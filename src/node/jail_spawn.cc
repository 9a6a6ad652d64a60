#include "node/jail_spawn.h"

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "common/host_slots.h"
#include "common/kill_child.h"
#include "common/syscall.h"
#include "runtime/ns/userns.h"

namespace space::node {

uint32_t SlotLease::uid_base() const { return HostSlots::UidBase(slot_); }

Status JailChild::GiveUp(Status st) {
  (void)KillChildPid(acts, pid);
  (void)RetryEintr([&] { return ::waitpid(pid, nullptr, 0); });
  return st;
}

Result<JailChild> SpawnJailChild(HelperSpec spec, uint32_t uid_base, const std::string& what, PrivilegedActs* acts) {
  spec.user.root_in_namespace = true;
  spec.user.map_ids = [uid_base, acts](int pidfd, pid_t pid) {
    return runtime::ns::MapIds(acts, {.pidfd = pidfd, .pid = pid, .uid_base = uid_base, .shape = IdMapShape::kSandbox});
  };
  JailChild child;
  child.acts = acts;
  ASSIGN_OR_RETURN(child.pid, SpawnHelper(spec));
  // Our child, not yet reaped: its pid cannot name another process before the wait.
  child.pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, child.pid, 0)));
  if (!child.pidfd) return child.GiveUp(ErrnoStatus("pidfd_open", what, errno));
  return child;
}

}  // namespace space::node
