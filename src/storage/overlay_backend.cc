// Backend without btrfs: templates are plain directories and a root is an overlayfs mount
// (template as lowerdir) at <root_dir>/merged with <root_dir>/{upper,work}.
//
// Limits of this mode, by design of the fallback: the disk limit is NOT enforced (the
// backing filesystem offers no per-directory quota we can rely on: ext4 project quotas need
// a mkfs/tune2fs feature and mount option), templates are not made read-only (nothing
// but the pool writes under pool/, which is 0700), and there are no root snapshots: without
// reflinks a snapshot would be a full O(n) copy of the merged tree taken while the caller
// holds the sandbox frozen, and a root cloned from it would pin the snapshot directory as its
// lower layer, so deleting a parent snapshot would have to be refused while children live.

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/syscall.h"
#include "storage/backend.h"
#include "storage/fs_util.h"

namespace space::storage {
namespace {

constexpr char kTemplateFile[] = "/template";  // which template a root was made from

class OverlayBackend final : public Backend {
 public:
  std::string kind() const override { return "overlay"; }

  Status CreateScratch(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) != 0) return ErrnoStatus("mkdir", path, errno);
    if (::chmod(path.c_str(), 0755) != 0) return ErrnoStatus("chmod", path, errno);  // umask
    return Status::Ok();
  }

  Status Seal(const std::string& scratch, const std::string& final_path) override {
    if (::rename(scratch.c_str(), final_path.c_str()) != 0) return ErrnoStatus("rename", final_path, errno);
    return Status::Ok();
  }

  Status RemoveTree(const std::string& path) override { return space::storage::RemoveTree(path); }

  Result<std::string> CreateRoot(const std::string& template_path, const std::string& root_dir,
                                 uint64_t disk_limit_bytes) override {
    if (::mkdir(root_dir.c_str(), 0700) != 0) return ErrnoStatus("mkdir", root_dir, errno);
    Status st = Populate(template_path, root_dir);
    if (!st.ok()) {
      Status cleanup = DestroyRoot(root_dir);
      if (!cleanup.ok()) LogError("storage", "cleanup of " + root_dir + ": " + cleanup.ToString());
      return st;
    }
    if (disk_limit_bytes != 0) {
      LogDebug("storage", "overlay pool: disk limit for " + root_dir + " is not enforced");
    }
    return RootPath(root_dir);
  }

  Status DestroyRoot(const std::string& root_dir) override {
    std::string merged = RootPath(root_dir);
    // Lazy: a sandbox process may still hold the mount busy; new lookups stop right away.
    if (::umount2(merged.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
      return ErrnoStatus("umount2", merged, errno);
    }
    return space::storage::RemoveTree(root_dir);
  }

  std::string RootPath(const std::string& root_dir) const override { return root_dir + "/merged"; }

  Status SetRootDiskLimit(const std::string&, uint64_t) override { return Status::Ok(); }  // not enforced

  bool has_snapshots() const override { return false; }

  Status SnapshotRoot(const std::string&, const std::string&) override {
    return Unavailable("snapshots need the btrfs pool");
  }

  uint64_t ExclusiveBytes(const std::string&) override { return 0; }

  // Overlay mounts do not survive a reboot; bring back the ones whose directories remain.
  Status RestoreRoot(const std::string& templates_dir, const std::string& root_dir) override {
    std::string merged = RootPath(root_dir);
    struct stat a, b;
    if (::stat(merged.c_str(), &a) == 0 && ::stat(root_dir.c_str(), &b) == 0 && a.st_dev != b.st_dev) {
      return Status::Ok();  // still mounted
    }
    ASSIGN_OR_RETURN(std::string tmpl, ReadFileToString(root_dir + kTemplateFile, 4096));
    return Mount(templates_dir + "/" + tmpl, root_dir);
  }

 private:
  Status Populate(const std::string& template_path, const std::string& root_dir) {
    for (const char* sub : {"/upper", "/work", "/merged"}) {
      std::string p = root_dir + sub;
      if (::mkdir(p.c_str(), 0755) != 0) return ErrnoStatus("mkdir", p, errno);
    }
    std::string base = template_path.substr(template_path.find_last_of('/') + 1);
    RETURN_IF_ERROR(WriteFileAtomic(root_dir + kTemplateFile, base, 0600));
    return Mount(template_path, root_dir);
  }

  Status Mount(const std::string& template_path, const std::string& root_dir) {
    std::string opts = "lowerdir=" + template_path + ",upperdir=" + root_dir + "/upper,workdir=" + root_dir + "/work";
    std::string merged = RootPath(root_dir);
    // Same nosuid/nodev reasoning as the btrfs pool mount (pool_mount.cc).
    if (::mount("overlay", merged.c_str(), "overlay", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) {
      return ErrnoStatus("mount overlay", merged, errno);
    }
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Backend> NewOverlayBackend() { return std::make_unique<OverlayBackend>(); }

}  // namespace space::storage
