// Backend on btrfs: templates are read-only subvolumes, roots are writable snapshots of
// them (O(1), a few ms), and the disk limit is a qgroup limit on the root's exclusive bytes.

#include <sys/stat.h>

#include "common/log.h"
#include "storage/backend.h"
#include "storage/btrfs.h"
#include "storage/fs_util.h"

namespace space::storage {
namespace {

class BtrfsBackend final : public Backend {
 public:
  BtrfsBackend(bool quota_enabled, PrivilegedActs* acts) : quota_enabled_(quota_enabled), acts_(acts) {}

  std::string kind() const override { return "btrfs"; }

  Status CreateScratch(const std::string& path) override { return CreateSubvolume(acts_, path); }

  // A read-only snapshot rather than flipping the ro property in place: the template's
  // subvolume is then created already frozen, never observable writable under its final name.
  Status Seal(const std::string& scratch, const std::string& final_path) override {
    RETURN_IF_ERROR(CreateSnapshot(acts_, scratch, final_path, /*read_only=*/true));
    return DeleteSubvolume(acts_, scratch);
  }

  Status RemoveTree(const std::string& path) override {
    if (!PathExists(path)) return Status::Ok();
    if (IsSubvolume(path)) return DeleteSubvolume(acts_, path);
    return space::storage::RemoveTree(path);
  }

  Result<std::string> CreateRoot(const std::string& template_path, const std::string& root_dir,
                                 uint64_t disk_limit_bytes) override {
    RETURN_IF_ERROR(CreateSnapshot(acts_, template_path, root_dir, /*read_only=*/false));
    if (disk_limit_bytes == 0) return root_dir;
    if (!quota_enabled_) {
      LogWarn("storage", "disk limit for " + root_dir + " not enforced: btrfs quotas are off");
      return root_dir;
    }
    Status st = SetExclusiveLimit(acts_, root_dir, disk_limit_bytes);
    if (!st.ok()) {
      Status cleanup = DeleteSubvolume(acts_, root_dir);
      if (!cleanup.ok()) LogError("storage", "cleanup after failed limit: " + cleanup.ToString());
      return st;
    }
    return root_dir;
  }

  // The subvolume's qgroup is left for the kernel: since Linux 6.10 it drops the level-0
  // qgroup of a deleted subvolume by itself once the cleaner has freed it.
  Status DestroyRoot(const std::string& root_dir) override { return RemoveTree(root_dir); }

  Status SetRootDiskLimit(const std::string& root_dir, uint64_t disk_limit_bytes) override {
    if (!quota_enabled_ || disk_limit_bytes == 0) return Status::Ok();
    return SetExclusiveLimit(acts_, root_dir, disk_limit_bytes);
  }

  std::string RootPath(const std::string& root_dir) const override { return root_dir; }

  Status RestoreRoot(const std::string&, const std::string&) override { return Status::Ok(); }

  bool has_snapshots() const override { return true; }

  // One transaction: the snapshot appears complete or not at all. Subvolumes the sandbox
  // nested inside its root are not part of it (btrfs snapshots stop at subvolume bounds).
  Status SnapshotRoot(const std::string& root_dir, const std::string& snap_path) override {
    return CreateSnapshot(acts_, root_dir, snap_path, /*read_only=*/true);
  }

  uint64_t ExclusiveBytes(const std::string& path) override {
    if (!quota_enabled_) return 0;
    Result<uint64_t> excl = QgroupExclusiveBytes(path);
    if (!excl.ok()) {
      LogDebug("storage", "exclusive bytes of " + path + ": " + excl.status().ToString());
      return 0;
    }
    return *excl;
  }

 private:
  const bool quota_enabled_;
  PrivilegedActs* const acts_;  // the broker; null: acts run here
};

}  // namespace

std::unique_ptr<Backend> NewBtrfsBackend(bool quota_enabled, PrivilegedActs* acts) {
  return std::make_unique<BtrfsBackend>(quota_enabled, acts);
}

}  // namespace space::storage
