// PrivilegedActs: the acts a process gave up the privilege for and has done on its behalf. The
// node runs with no capability; its root broker (broker/broker_client.h) implements this and
// checks every request (broker/broker.h). Handed to whatever needs one of these acts, in its
// config (runtime::RuntimeConfig, storage::PoolConfig, the jails', the node's parts), never
// reached through a global, so the dependency is visible in the types. Null where a process
// keeps the privilege itself (the broker, unit tests run as root): the act then runs locally.
//
// Implementations are thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace space {

// What a fresh user namespace maps, for a uid slot whose first host id is uid_base.
enum class IdMapShape {
  // "0 uid_base 65536" for uids and gids: a sandbox, root inside.
  kSandbox,
  // "uid_base uid_base 1" for uids and gids (plus "kvm kvm 1" for gids when a kvm group is
  // given): one process that keeps a host id of its own and can become nothing else (a VMM,
  // the API front, the gateway worker); uid 0 has no mapping.
  kOneId,
};

struct IdMapRequest {
  int pidfd = -1;  // the child in the fresh user namespace
  pid_t pid = -1;  // its pid (a child of this process, not yet waited for)
  uint32_t uid_base = 0;
  IdMapShape shape = IdMapShape::kSandbox;
  gid_t kvm_gid = 0;  // 0: none
};

class PrivilegedActs {
 public:
  virtual ~PrivilegedActs() = default;

  // Processes (CAP_KILL, CAP_SYS_NICE): a child of this process, by pidfd; a thread of it.
  // KillChild answers not_found when the child has exited.
  virtual Status KillChild(int pidfd) = 0;
  virtual Status SetChildNice(int pidfd, int nice) = 0;
  virtual Status SetThreadNice(pid_t tid, int nice) = 0;

  // User namespaces (CAP_SETUID, CAP_SETGID): the id maps of a child's fresh namespace.
  virtual Status MapUserns(const IdMapRequest& request) = 0;
  // Mounts (CAP_SYS_ADMIN): a detached clone of the tree open as `dir_fd`, idmapped to the
  // user namespace of the child behind `pidfd` (root there = host `uid_base`).
  virtual Result<UniqueFd> IdmapTree(int dir_fd, int pidfd, uint32_t uid_base, bool read_only) = 0;

  // The pool's btrfs (CAP_SYS_ADMIN): acts on subvolumes below the pool only.
  virtual Status DeleteSubvolume(const std::string& path) = 0;
  virtual Status SnapshotSubvolume(const std::string& source, const std::string& path, bool read_only) = 0;
  virtual Status CreateSubvolume(const std::string& path) = 0;
  virtual Status SetExclusiveLimit(const std::string& subvol_path, uint64_t bytes) = 0;
  // True when this call started a quota rescan.
  virtual Result<bool> RescanQuotaIfInconsistent() = 0;

  // The vm runtime's state dir in a sandbox root, which is uid 0's (the root's own).
  virtual Status MakeVmStateDir(const std::string& rootfs) = 0;
};

}  // namespace space
