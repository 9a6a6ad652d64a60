// Thin Status-returning wrappers over libbtrfsutil and the btrfs ioctls the pool uses:
// subvolumes, snapshots, quota groups. Stateless and thread-safe; all need CAP_SYS_ADMIN.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace space::storage {

// statfs(path).f_type == BTRFS_SUPER_MAGIC.
bool IsOnBtrfs(const std::string& path);

Status CreateSubvolume(const std::string& path);
// A writable or read-only snapshot of subvolume `source` at `path`.
Status CreateSnapshot(const std::string& source, const std::string& path, bool read_only);
// Deletes subvolume `path` and any subvolumes nested below it. OK if absent.
Status DeleteSubvolume(const std::string& path);
bool IsSubvolume(const std::string& path);
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
Result<bool> RescanIfInconsistent(const std::string& path);
// Waits up to `timeout_ms` for a running quota rescan to end; true when none runs any more.
Result<bool> WaitForRescan(const std::string& path, int timeout_ms);
// Bytes referenced only by subvolume `subvol_path` (its level-0 qgroup's "excl"), as of the
// last committed transaction: syncfs first for an up-to-date figure. not_found when quotas
// are off or the qgroup does not exist.
Result<uint64_t> QgroupExclusiveBytes(const std::string& subvol_path);
// Limits the exclusive bytes of subvolume `subvol_path` (its level-0 qgroup 0/<id>).
Status SetExclusiveLimit(const std::string& subvol_path, uint64_t bytes);

}  // namespace space::storage
