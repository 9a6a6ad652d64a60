#include "storage/pool_mount.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/subprocess.h"
#include "common/syscall.h"
#include "storage/btrfs.h"
#include "storage/fs_util.h"
#include "storage/loop_device.h"

namespace space::storage {
namespace {

constexpr char kLog[] = "storage";
constexpr const char* kMkfsPaths[] = {"/sbin/mkfs.btrfs", "/usr/sbin/mkfs.btrfs", "/usr/bin/mkfs.btrfs"};

// Creates <image> sparse and formats it. Built under a temporary name so that the presence
// of pool.img always means "formatted": a crash mid-mkfs leaves only the .tmp behind.
Status CreateImage(const std::string& image, uint64_t bytes) {
  std::string mkfs;
  for (const char* p : kMkfsPaths) {
    if (::access(p, X_OK) == 0) {
      mkfs = p;
      break;
    }
  }
  if (mkfs.empty()) return Unavailable("mkfs.btrfs not found (install btrfs-progs)");
  std::string tmp = image + ".tmp";
  // A new file, never one the node (which owns the data dir) left there or linked: and mkfs
  // formats this very file, through its own descriptor, whatever the name means by then.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("unlink", tmp, errno);
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600));
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) return ErrnoStatus("ftruncate", tmp, errno);
  SubprocessSpec format;
  format.argv = {mkfs, "-q", "-f", "/dev/stdin"};
  format.stdin_fd = fd.get();
  Status st = RunProcess(format, nullptr);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  if (::rename(tmp.c_str(), image.c_str()) != 0) return ErrnoStatus("rename", image, errno);
  return Status::Ok();
}

// Attaches the image and mounts it. nosuid: sandbox roots hold setuid binaries owned by
// on-disk uid 0, which must never act as setuid for the host. The loop fd is closed only
// after the mount holds the device, so AUTOCLEAR detaches it exactly at unmount.
Status MountImage(const std::string& image, const std::string& pool_dir) {
  // Onto the directory itself, never through a link the node left in its data dir (it owns it).
  ASSIGN_OR_RETURN(UniqueFd target, OpenFd(pool_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  ASSIGN_OR_RETURN(LoopDevice loop, AttachLoopDevice(image));
  const std::string at = "/proc/self/fd/" + std::to_string(target.get());
  if (::mount(loop.path.c_str(), at.c_str(), "btrfs", MS_NOSUID | MS_NODEV, nullptr) != 0) {
    return ErrnoStatus("mount " + loop.path, pool_dir, errno);
  }
  LogInfo(kLog, "mounted " + image + " (" + loop.path + ") at " + pool_dir);
  return Status::Ok();
}

bool DirIsEmpty(const std::string& path) {
  Result<std::vector<std::string>> names = ListDir(path);
  return names.ok() && names->empty();
}

Status MakeLayout(const std::string& pool_dir) {
  // 0700 everywhere: host users must not reach into sandbox files (setuid binaries, secrets).
  if (::chmod(pool_dir.c_str(), 0700) != 0) return ErrnoStatus("chmod", pool_dir, errno);
  for (const char* sub : {"/templates", "/sandboxes", "/snapshots", "/volumes"}) {
    std::string p = pool_dir + sub;
    if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus("mkdir", p, errno);
  }
  return Status::Ok();
}

Result<PoolMount> Finish(PoolMount m) {
  RETURN_IF_ERROR(MakeLayout(m.pool_dir));
  if (!m.btrfs) return m;
  // Enabling quotas on a fresh filesystem is instant; on a big existing one the kernel starts
  // a rescan in the background and limits are approximate until it finishes. A failure only
  // costs the disk limits, so it is logged, not fatal.
  Status q = EnableQuota(m.pool_dir);
  m.quota_enabled = q.ok();
  if (!q.ok()) {
    LogWarn(kLog, "btrfs quotas unavailable, sandbox disk limits will NOT be enforced: " + q.ToString());
    return m;
  }
  std::string note;
  if (Status c = KeepQuotaConsistent(m.pool_dir, &note); !c.ok()) {
    LogWarn(kLog, "cannot keep btrfs quota accounting exact (deleting large sandboxes may turn disk limits off "
                  "until a rescan): " + c.ToString());
  } else if (!note.empty()) {
    // Limits hold only once the rescan is done: wait for it before any sandbox is created
    // (seconds on a pool of a few templates), up to a minute, then go on and say so.
    LogWarn(kLog, note);
    const int64_t t0 = MonoNowNs();
    auto done = WaitForRescan(m.pool_dir, 60000);
    if (done.ok() && *done) {
      LogInfo(kLog, "btrfs quota rescan finished in " + std::to_string((MonoNowNs() - t0) / 1000000) + " ms");
    } else {
      LogWarn(kLog, "btrfs quota rescan still running after 60 s; disk limits are approximate until it ends");
    }
  }
  return m;
}

}  // namespace

Result<PoolMount> MountPool(const PoolConfig& config) {
  if (config.data_dir.empty() || config.data_dir[0] != '/') {
    return InvalidArgument("data_dir must be an absolute path");
  }
  // overlayfs takes its layer paths in a comma/colon separated option string.
  if (config.data_dir.find_first_of(",:") != std::string::npos) {
    return InvalidArgument("data_dir must not contain ',' or ':'");
  }
  RETURN_IF_ERROR(MakeDirs(config.data_dir, 0700));
  PoolMount m;
  m.pool_dir = config.data_dir + "/pool";
  if (::mkdir(m.pool_dir.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus("mkdir", m.pool_dir, errno);
  // The node (not root) owns the data dir: the pool is its own directory, not a link elsewhere.
  {
    struct stat sb;
    if (::lstat(m.pool_dir.c_str(), &sb) != 0) return ErrnoStatus("lstat", m.pool_dir, errno);
    if (!S_ISDIR(sb.st_mode)) return PermissionDenied(m.pool_dir + " is not a directory (a link?); refusing it");
  }

  if (config.force_overlay) return Finish(m);
  // Covers both "already mounted by an earlier run" and "data_dir is itself on btrfs".
  if (IsOnBtrfs(m.pool_dir)) {
    m.btrfs = true;
    // A pool image an earlier run (or an older version) attached may still use cached I/O.
    if (Status dio = SetLoopDirectIo(m.pool_dir); !dio.ok()) LogWarn(kLog, "pool direct I/O: " + dio.ToString());
    return Finish(m);
  }
  std::string image = config.data_dir + "/pool.img";
  if (!PathExists(image) && !DirIsEmpty(m.pool_dir)) {
    // An earlier run fell back to plain directories here; mounting over them would hide
    // every template and root it made.
    LogWarn(kLog, m.pool_dir + " holds an overlay-kind pool; keeping it");
    return Finish(m);
  }
  if (!PathExists(image)) {
    Status st = CreateImage(image, config.loop_image_bytes);
    if (!st.ok()) {
      LogWarn(kLog, "cannot create btrfs image, falling back to overlay: " + st.ToString());
      return Finish(m);
    }
    LogInfo(kLog, "created btrfs image " + image + " (" + std::to_string(config.loop_image_bytes >> 20) + " MiB sparse)");
  }
  Status st = MountImage(image, m.pool_dir);
  if (!st.ok()) {
    LogWarn(kLog, "cannot mount btrfs image, falling back to overlay: " + st.ToString());
    return Finish(m);
  }
  m.btrfs = true;
  return Finish(m);
}

}  // namespace space::storage
