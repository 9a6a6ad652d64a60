// User namespace: maps sandbox uids/gids [0, 65536) to host [uid_base, uid_base + 65536)
// and makes the child root inside it.
//
// Writing another process's maps takes CAP_SETUID and CAP_SETGID on the host, which the node
// leaves to its root broker (common/privileged_acts.h), which maps only user namespaces of the
// node's children, to uid slots (broker.h, userns_map).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/privileged_acts.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "runtime/ns/steps.h"

namespace space::runtime::ns {

using space::IdMapRequest;
using space::IdMapShape;

std::string UidMapText(IdMapShape shape, uint32_t uid_base);
std::string GidMapText(IdMapShape shape, uint32_t uid_base, gid_t kvm_gid);

// Parent side: writes uid_map and gid_map of the child (which must be in a fresh user ns
// created by this process), through `acts` when set, here otherwise. Written by a privileged
// process, gid_map needs no "deny" in setgroups first, so setgroups() keeps working inside
// for accounts like 'user'.
Status MapIds(PrivilegedActs* acts, const IdMapRequest& request);

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
