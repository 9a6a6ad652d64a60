#include "storage/btrfs.h"

#include <btrfsutil.h>
#include <endian.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/clock.h"
#include "common/syscall.h"

namespace space::storage {
namespace {

// libbtrfsutil leaves errno set by the failing syscall; its own code says which step failed.
Status UtilStatus(const char* call, const std::string& path, btrfs_util_error err) {
  int e = errno;
  Status st = ErrnoStatus(call, path, e != 0 ? e : EIO);
  return Status(st.code(), st.message() + " [" + btrfs_util_strerror(err) + "]");
}

}  // namespace

bool IsOnBtrfs(const std::string& path) {
  struct statfs sf;
  return ::statfs(path.c_str(), &sf) == 0 && sf.f_type == BTRFS_SUPER_MAGIC;
}

Status CreateSubvolume(PrivilegedActs* acts, const std::string& path) {
  if (acts != nullptr) return acts->CreateSubvolume(path);
  if (::geteuid() != 0) return PermissionDenied("btrfs create subvolume " + path + ": its top would not be uid 0's");
  errno = 0;
  btrfs_util_error err = btrfs_util_create_subvolume(path.c_str(), 0, nullptr, nullptr);
  if (err != BTRFS_UTIL_OK) return UtilStatus("btrfs create subvolume", path, err);
  return Status::Ok();
}

Status CreateSubvolumeAt(int parent_fd, const std::string& name) {
  errno = 0;
  btrfs_util_error err = btrfs_util_create_subvolume_fd(parent_fd, name.c_str(), 0, nullptr, nullptr);
  if (err != BTRFS_UTIL_OK) return UtilStatus("btrfs create subvolume", name, err);
  return Status::Ok();
}

Status CreateSnapshot(PrivilegedActs* acts, const std::string& source, const std::string& path, bool read_only) {
  errno = 0;
  int flags = read_only ? BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY : 0;
  btrfs_util_error err = btrfs_util_create_snapshot(source.c_str(), path.c_str(), flags, nullptr, nullptr);
  if (err == BTRFS_UTIL_OK) return Status::Ok();
  // Tried here first: every template and nearly every root is uid 0's, and a snapshot is on
  // the create path, where a round trip to the broker would cost. EPERM: a root its sandbox
  // chowned away from uid 0; EACCES: one it made unreadable (0700), which the node may not open.
  if ((errno == EPERM || errno == EACCES) && acts != nullptr) return acts->SnapshotSubvolume(source, path, read_only);
  return UtilStatus("btrfs snapshot", source + " -> " + path, err);
}

Status CreateSnapshotAt(int source_fd, int parent_fd, const std::string& name, bool read_only) {
  errno = 0;
  int flags = read_only ? BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY : 0;
  btrfs_util_error err = btrfs_util_create_snapshot_fd2(source_fd, parent_fd, name.c_str(), flags, nullptr, nullptr);
  if (err != BTRFS_UTIL_OK) return UtilStatus("btrfs snapshot", name, err);
  return Status::Ok();
}

Status DeleteSubvolume(PrivilegedActs* acts, const std::string& path) {
  if (acts != nullptr) return acts->DeleteSubvolume(path);
  errno = 0;
  btrfs_util_error err = btrfs_util_delete_subvolume(path.c_str(), BTRFS_UTIL_DELETE_SUBVOLUME_RECURSIVE);
  if (err == BTRFS_UTIL_OK) return Status::Ok();
  if (errno == ENOENT) return Status::Ok();
  return UtilStatus("btrfs delete subvolume", path, err);
}

Status DeleteSubvolumeAt(int parent_fd, const std::string& name) {
  errno = 0;
  btrfs_util_error err = btrfs_util_delete_subvolume_fd(parent_fd, name.c_str(), BTRFS_UTIL_DELETE_SUBVOLUME_RECURSIVE);
  if (err == BTRFS_UTIL_OK) return Status::Ok();
  if (errno == ENOENT) return Status::Ok();
  return UtilStatus("btrfs delete subvolume", name, err);
}

bool IsSubvolume(const std::string& path) { return btrfs_util_is_subvolume(path.c_str()) == BTRFS_UTIL_OK; }

bool IsSubvolumeFd(int fd) { return btrfs_util_is_subvolume_fd(fd) == BTRFS_UTIL_OK; }

Result<uint64_t> SubvolumeId(const std::string& path) {
  uint64_t id = 0;
  errno = 0;
  btrfs_util_error err = btrfs_util_subvolume_id(path.c_str(), &id);
  if (err != BTRFS_UTIL_OK) return UtilStatus("btrfs subvolume id", path, err);
  return id;
}

Status EnableQuota(const std::string& path) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY | O_DIRECTORY));
  struct btrfs_ioctl_quota_ctl_args args = {};
  args.cmd = BTRFS_QUOTA_CTL_ENABLE;
  if (::ioctl(fd.get(), BTRFS_IOC_QUOTA_CTL, &args) != 0) return ErrnoStatus("ioctl BTRFS_IOC_QUOTA_CTL", path, errno);
  return Status::Ok();
}

Result<std::string> QuotaSysfsDir(const std::string& path) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY | O_DIRECTORY));
  struct btrfs_ioctl_fs_info_args info = {};
  if (::ioctl(fd.get(), BTRFS_IOC_FS_INFO, &info) != 0) return ErrnoStatus("ioctl BTRFS_IOC_FS_INFO", path, errno);
  char uuid[37];
  const uint8_t* f = info.fsid;
  std::snprintf(uuid, sizeof uuid, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", f[0], f[1],
                f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12], f[13], f[14], f[15]);
  return "/sys/fs/btrfs/" + std::string(uuid) + "/qgroups";
}

Status KeepQuotaConsistent(const std::string& path, std::string* note) {
  ASSIGN_OR_RETURN(std::string dir, QuotaSysfsDir(path));
  const std::string knob = dir + "/drop_subtree_threshold";
  if (::access(knob.c_str(), F_OK) == 0) RETURN_IF_ERROR(WriteSmallFile(knob, "8"));  // BTRFS_MAX_LEVEL
  ASSIGN_OR_RETURN(bool started, RescanIfInconsistent(nullptr, path));
  // A rescan already running (EINPROGRESS) leaves the flag set too: say so either way.
  auto flag = ReadFileToString(dir + "/inconsistent", 16);
  if (started || (flag.ok() && !flag->empty() && (*flag)[0] == '1')) {
    *note = "btrfs quota accounting was inconsistent; a rescan is running and disk limits are approximate until it ends";
  }
  return Status::Ok();
}

Result<bool> RescanIfInconsistent(PrivilegedActs* acts, const std::string& path) {
  if (acts != nullptr) return acts->RescanQuotaIfInconsistent();
  ASSIGN_OR_RETURN(std::string dir, QuotaSysfsDir(path));
  auto flag = ReadFileToString(dir + "/inconsistent", 16);
  if (!flag.ok() || flag->empty() || (*flag)[0] != '1') return false;
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY | O_DIRECTORY));
  struct btrfs_ioctl_quota_rescan_args args = {};
  if (::ioctl(fd.get(), BTRFS_IOC_QUOTA_RESCAN, &args) == 0) return true;
  if (errno == EINPROGRESS) return false;
  return ErrnoStatus("ioctl BTRFS_IOC_QUOTA_RESCAN", path, errno);
}

Result<bool> WaitForRescan(const std::string& path, int timeout_ms) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY | O_DIRECTORY));
  const int64_t deadline = MonoNowNs() + int64_t{timeout_ms} * 1000000;
  for (;;) {
    struct btrfs_ioctl_quota_rescan_args args = {};
    if (::ioctl(fd.get(), BTRFS_IOC_QUOTA_RESCAN_STATUS, &args) != 0) {
      return ErrnoStatus("ioctl BTRFS_IOC_QUOTA_RESCAN_STATUS", path, errno);
    }
    if (args.flags == 0) return true;
    if (MonoNowNs() > deadline) return false;
    ::usleep(20000);
  }
}

Result<uint64_t> QgroupExclusiveBytes(const std::string& subvol_path) {
  ASSIGN_OR_RETURN(uint64_t id, SubvolumeId(subvol_path));
  ASSIGN_OR_RETURN(std::string dir, QuotaSysfsDir(subvol_path));
  const std::string file = dir + "/0_" + std::to_string(id) + "/exclusive";
  Result<std::string> text = ReadFileToString(file, 64);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return NotFound("no qgroup 0/" + std::to_string(id) + " for " + subvol_path);
    return text.status();
  }
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text->c_str(), &end, 10);
  if (end == text->c_str() || errno != 0) return Internal(file + ": not a number");
  return static_cast<uint64_t>(v);
}

Status SetExclusiveLimit(PrivilegedActs* acts, const std::string& subvol_path, uint64_t bytes) {
  if (acts != nullptr) return acts->SetExclusiveLimit(subvol_path, bytes);
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(subvol_path, O_RDONLY | O_DIRECTORY));
  return SetExclusiveLimitFd(fd.get(), bytes).Annotate(subvol_path);
}

Status SetExclusiveLimitFd(int subvol_fd, uint64_t bytes) {
  uint64_t id = 0;
  errno = 0;
  btrfs_util_error err = btrfs_util_subvolume_id_fd(subvol_fd, &id);
  if (err != BTRFS_UTIL_OK) return UtilStatus("btrfs subvolume id", "qgroup limit", err);
  struct btrfs_ioctl_qgroup_limit_args args = {};
  args.qgroupid = id;  // level 0: the qgroup id is the subvolume id
  args.lim.flags = BTRFS_QGROUP_LIMIT_MAX_EXCL;
  args.lim.max_excl = bytes;
  if (::ioctl(subvol_fd, BTRFS_IOC_QGROUP_LIMIT, &args) != 0) {
    return ErrnoStatus("ioctl BTRFS_IOC_QGROUP_LIMIT", "subvolume " + std::to_string(id), errno);
  }
  return Status::Ok();
}

}  // namespace space::storage
