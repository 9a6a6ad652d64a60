// User namespace: maps sandbox uids/gids [0, 65536) to host [uid_base, uid_base + 65536)
// and makes the child root inside it.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "common/result.h"
#include "common/unique_fd.h"
#include "runtime/ns/steps.h"

namespace space::runtime::ns {

// Parent side: writes uid_map and gid_map of `pid` (which must be in a fresh user ns
// created by this process). As host root we may write gid_map without first denying
// setgroups, so setgroups() keeps working inside for accounts like 'user'.
Status WriteIdMaps(pid_t pid, uint32_t uid_base, uint32_t count);

// Parent side: an fd of `pid`'s user namespace (for MOUNT_ATTR_IDMAP).
Result<UniqueFd> OpenUserNs(pid_t pid);

// Child side, async-signal-safe: drops supplementary groups and becomes uid/gid 0 of the
// user namespace (host uid_base). Raw syscalls: glibc's set*id wrappers broadcast to
// every thread of the (copied) parent, which do not exist in the child and whose lock
// may be held. Returns 0 or an errno, with the failing call in *call.
int ChildBecomeRoot(Call* call);

}  // namespace space::runtime::ns
