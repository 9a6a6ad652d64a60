// Thin Status-returning wrappers over libbtrfsutil and the btrfs ioctls the pool uses:
// subvolumes, snapshots, quota groups. Thread-safe.
//
// Privilege: creating subvolumes and snapshots needs only ownership (and CAP_FOWNER for a
// snapshot of a root-owned tree); reading a qgroup's usage and a subvolume's id need nothing
// (sysfs, the unprivileged INO_LOOKUP). Enabling quotas, deleting a subvolume, limiting a
// qgroup and starting or watching a rescan need CAP_SYS_ADMIN: once its pool is mounted the
// node leaves the last three to its root broker (`acts`: common/privileged_acts.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/privileged_acts.h"
#include "common/result.h"

namespace space::storage {

// statfs(path).f_type == BTRFS_SUPER_MAGIC.
bool IsOnBtrfs(const std::string& path);

// An empty subvolume at `path`, its top directory owned by uid 0 (mode 0755): the build jail
// and the tree jail write it as root of their namespaces, through an idmapped clone that maps
// only ids 0..65535. A node that is not uid 0 has its broker (`acts`) make it.
Status CreateSubvolume(PrivilegedActs* acts, const std::string& path);
// The same at `name` (one path component) in directory `parent_fd`, as the caller.
Status CreateSubvolumeAt(int parent_fd, const std::string& name);
// A writable or read-only snapshot of subvolume `source` at `path`. The kernel lets only the
// owner of `source`'s root (or CAP_FOWNER) snapshot it: when that refuses (EPERM: a sandbox's
// root chowned its own / away from uid 0) and `acts` is set, the broker makes it.
Status CreateSnapshot(PrivilegedActs* acts, const std::string& source, const std::string& path, bool read_only);
// The same for the subvolume open as `source_fd` (O_RDONLY), at `name` in directory `parent_fd`.
Status CreateSnapshotAt(int source_fd, int parent_fd, const std::string& name, bool read_only);
// Deletes subvolume `path` and any subvolumes nested below it. OK if absent. Through `acts`
// when set (deleting a subvolume takes CAP_SYS_ADMIN).
Status DeleteSubvolume(PrivilegedActs* acts, const std::string& path);
// The same for subvolume `name` (one path component) of directory `parent_fd`.
Status DeleteSubvolumeAt(int parent_fd, const std::string& name);
bool IsSubvolume(const std::string& path);
// The same for what directory `fd` names (an O_PATH descriptor will do).
bool IsSubvolumeFd(int fd);
Result<uint64_t> SubvolumeId(const std::string& path);

// Turns on quota groups for the filesystem holding `path` (no-op when already on).
Status EnableQuota(const std::string& path);
// "/sys/fs/btrfs/<fsid>/qgroups" of the filesystem holding `path`.
Result<std::string> QuotaSysfsDir(const std::string& path);
// Keeps the quota accounting of the filesystem holding `path` exact, so limits stay enforced:
// - Linux 6.8+ skips accounting when it drops a shared subtree of level >= its
//   qgroups/drop_subtree_threshold (default 3) and marks the qgroups inconsistent instead;
//   from then on no limit holds until a rescan. Deleting one sandbox cloned from a
//   Debian-sized template is enough. This raises the threshold to BTRFS_MAX_LEVEL (8: never
//   skip) for this mount; deletions cost the cleaner more, in the background.
// - When the accounting is already inconsistent, it starts a rescan (limits are approximate
//   until it ends) and says so in `*note`.
// Kernels without the sysfs knob never skip: nothing to do there.
Status KeepQuotaConsistent(const std::string& path, std::string* note);
// Starts a quota rescan when the accounting of the filesystem holding `path` is marked
// inconsistent. Linux 6.10+ also marks it so when its cleaner drops the qgroup of a deleted
// subvolume whose numbers are not zero yet ("to be deleted qgroup ... has non-zero numbers",
// seen on this pool after sandbox deletes); limits then do not hold until a rescan. True when
// this call started one (false when the accounting is exact or a rescan already runs).
// Through `acts` (the broker's own pool) when set.
Result<bool> RescanIfInconsistent(PrivilegedActs* acts, const std::string& path);
// Waits up to `timeout_ms` for a running quota rescan to end; true when none runs any more.
Result<bool> WaitForRescan(const std::string& path, int timeout_ms);
// Bytes referenced only by subvolume `subvol_path` (its level-0 qgroup's "excl", read from
// /sys/fs/btrfs/<fsid>/qgroups/0_<id>/exclusive), as of the last committed transaction:
// syncfs first for an up-to-date figure. not_found when quotas are off or the qgroup does
// not exist.
Result<uint64_t> QgroupExclusiveBytes(const std::string& subvol_path);
// Limits the exclusive bytes of subvolume `subvol_path` (its level-0 qgroup 0/<id>), through
// `acts` when set.
Status SetExclusiveLimit(PrivilegedActs* acts, const std::string& subvol_path, uint64_t bytes);
// The same for the subvolume whose root directory is open as `subvol_fd`.
Status SetExclusiveLimitFd(int subvol_fd, uint64_t bytes);

}  // namespace space::storage
