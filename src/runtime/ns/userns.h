// User namespace: maps sandbox uids/gids [0, 65536) to host [uid_base, uid_base + 65536)
// and makes the child root inside it.
//
// Writing another process's maps takes CAP_SETUID and CAP_SETGID on the host, which the node
// leaves to its root broker: the node installs a route once (SetIdMapRoute), and the broker
// maps only user namespaces of the node's children, to uid slots (broker.h, userns_map).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"
#include "runtime/ns/steps.h"

namespace space::runtime::ns {

// What a fresh user namespace maps, for a uid slot whose first host id is uid_base.
enum class IdMapShape {
  // "0 uid_base 65536" for uids and gids: a sandbox, root inside.
  kSandbox,
  // "uid_base uid_base 1" for uids and gids (plus "kvm kvm 1" for gids when a kvm group is
  // given): one process that keeps a host id of its own and can become nothing else (a VMM,
  // the API front, the gateway worker); uid 0 has no mapping.
  kOneId,
};
std::string UidMapText(IdMapShape shape, uint32_t uid_base);
std::string GidMapText(IdMapShape shape, uint32_t uid_base, gid_t kvm_gid);

struct IdMapRequest {
  int pidfd = -1;  // the child in the fresh user namespace
  pid_t pid = -1;  // its pid (a child of this process, not yet waited for)
  uint32_t uid_base = 0;
  IdMapShape shape = IdMapShape::kSandbox;
  gid_t kvm_gid = 0;  // 0: none
};

// Writes the maps on this process's behalf.
using IdMapRoute = std::function<Status(const IdMapRequest&)>;
// Where MapIds goes from now on (empty: it writes the maps itself). Thread-safe.
void SetIdMapRoute(IdMapRoute route);

// Parent side: writes uid_map and gid_map of the child (which must be in a fresh user ns
// created by this process), through the route when one is set. Written by a privileged
// process, gid_map needs no "deny" in setgroups first, so setgroups() keeps working inside
// for accounts like 'user'.
Status MapIds(const IdMapRequest& request);

// The write itself, by pid, with this process's own privileges.
Status WriteIdMaps(pid_t pid, const std::string& uid_map, const std::string& gid_map);

// Parent side: an fd of `pid`'s user namespace (for MOUNT_ATTR_IDMAP).
Result<UniqueFd> OpenUserNs(pid_t pid);

// Child side, async-signal-safe: drops supplementary groups and becomes uid/gid 0 of the
// user namespace (host uid_base). Raw syscalls: glibc's set*id wrappers broadcast to
// every thread of the (copied) parent, which do not exist in the child and whose lock
// may be held. Returns 0 or an errno, with the failing call in *call.
int ChildBecomeRoot(Call* call);

}  // namespace space::runtime::ns
