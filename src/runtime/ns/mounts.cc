#include "runtime/ns/mounts.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "common/syscall.h"
#include "runtime/ns/userns.h"

namespace space::runtime::ns {
namespace {

constexpr unsigned long kNoSuidDevExec = MS_NOSUID | MS_NODEV | MS_NOEXEC;

// Files under /proc that reveal or control host-global state; /dev/null is bound over
// each. Missing ones (kernel config) are skipped.
constexpr const char* kMaskedProcFiles[] = {
    "proc/kcore",         "proc/keys",          "proc/timer_list",  "proc/sched_debug",
    "proc/sysrq-trigger", "proc/latency_stats", "proc/timer_stats",
};
// Directories hidden behind an empty read-only tmpfs.
constexpr const char* kMaskedProcDirs[] = {"proc/acpi", "proc/scsi"};
// Directories that stay visible but read-only: host-global knobs.
constexpr const char* kReadOnlyProcDirs[] = {"proc/sys", "proc/irq", "proc/bus", "proc/fs"};
// Host device nodes bound into the sandbox's /dev. Binding (not mknod) is the only way
// in a user namespace, and it grants nothing beyond these harmless devices.
constexpr const char* kDevices[] = {"null", "zero", "full", "random", "urandom", "tty"};

}  // namespace

Result<UniqueFd> OpenRootfs(const std::string& rootfs) {
  return OpenFd(rootfs, O_PATH | O_DIRECTORY);
}

Status EnsureMountPoints(int rootfs_fd, std::vector<const char*>* child_makes) {
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  for (const char* name : kMountPointDirs) {
    for (int attempt = 0;; ++attempt) {
      long fd =
          RetryEintr([&] { return ::syscall(SYS_openat2, rootfs_fd, name, &how, sizeof how); });
      if (fd >= 0) {
        ::close(static_cast<int>(fd));
        break;
      }
      int err = errno;
      // The root, or what is in it, is not this process's to search (a sandbox's root chmodded
      // its / to 0700): its init checks it, as root of its namespace.
      if (err == EACCES) {
        child_makes->push_back(name);
        break;
      }
      if (err == ENOENT && attempt == 0) {
        // mkdirat never follows a final symlink: an existing one gives EEXIST and the
        // retry above reports ELOOP.
        if (::mkdirat(rootfs_fd, name, 0755) != 0 && errno != EEXIST) {
          if (errno == EACCES || errno == EPERM) {
            child_makes->push_back(name);
            break;
          }
          return ErrnoStatus("mkdirat", std::string("rootfs/") + name, errno);
        }
        continue;
      }
      if (err == ELOOP || err == ENOTDIR || err == EXDEV) {
        return InvalidArgument(std::string("rootfs/") + name +
                               " is a symlink or not a directory; refusing to mount over it");
      }
      return ErrnoStatus("openat2", std::string("rootfs/") + name, err);
    }
  }
  return Status::Ok();
}

Result<UniqueFd> MakeIdmappedRoot(int rootfs_fd, int userns_fd, bool read_only) {
  long fd =
      ::syscall(SYS_open_tree, rootfs_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
  if (fd < 0) return ErrnoStatus("open_tree", "rootfs", errno);
  UniqueFd tree(static_cast<int>(fd));
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | (read_only ? MOUNT_ATTR_RDONLY : 0);
  attr.userns_fd = static_cast<uint64_t>(userns_fd);
  if (::syscall(SYS_mount_setattr, tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) {
    return ErrnoStatus("mount_setattr", "MOUNT_ATTR_IDMAP rootfs", errno);
  }
  return tree;
}

Result<UniqueFd> IdmapTree(PrivilegedActs* acts, const IdmapRequest& request) {
  if (acts != nullptr) return acts->IdmapTree(request.dir_fd, request.pidfd, request.uid_base, request.read_only);
  ASSIGN_OR_RETURN(UniqueFd userns, OpenUserNs(request.pid));
  return MakeIdmappedRoot(request.dir_fd, userns.get(), request.read_only);
}

void AppendMountOps(const MountPlanOptions& options, const std::vector<const char*>& make_first, PlanStorage* s) {
  auto add = [s](ChildOp op) { s->ops.push_back(op); };

  // One component each, made (if missing) and checked relative to the tree's root (the cwd)
  // before anything is mounted on it: mkdir never follows a final symlink, and the open that
  // follows refuses a link or a non-directory.
  for (const char* d : make_first) {
    add({.step = Step::kMountProc, .kind = ChildOp::kMountPoint, .target = d, .mode = 0755});
  }

  // proc: a fresh instance for the sandbox's pid namespace.
  add({.step = Step::kMountProc,
       .kind = ChildOp::kMount,
       .source = "proc",
       .target = "proc",
       .fstype = "proc",
       .flags = kNoSuidDevExec});

  for (const char* f : kMaskedProcFiles) {
    add({.step = Step::kMaskProc,
         .kind = ChildOp::kMount,
         .source = "/dev/null",
         .target = f,
         .flags = MS_BIND,
         .optional = true});
  }
  for (const char* d : kMaskedProcDirs) {
    add({.step = Step::kMaskProc,
         .kind = ChildOp::kMount,
         .source = "tmpfs",
         .target = d,
         .fstype = "tmpfs",
         .flags = MS_RDONLY | kNoSuidDevExec,
         .data = "size=0,mode=555",
         .optional = true});
  }
  for (const char* d : kReadOnlyProcDirs) {
    add({.step = Step::kMaskProc,
         .kind = ChildOp::kMount,
         .source = d,
         .target = d,
         .flags = MS_BIND | MS_REC,
         .optional = true});
    add({.step = Step::kMaskProc,
         .kind = ChildOp::kRemountReadOnly,
         .target = d,
         .flags = kNoSuidDevExec,
         .optional = true});
  }

  // sysfs is mountable because the sandbox owns its network namespace. If the host
  // hides parts of its own /sys, the kernel refuses (EPERM, mount_too_revealing); an
  // empty read-only tmpfs keeps /sys present and the parent logs why.
  add({.step = Step::kMountSys,
       .kind = ChildOp::kMount,
       .source = "sysfs",
       .target = "sys",
       .fstype = "sysfs",
       .flags = MS_RDONLY | kNoSuidDevExec,
       .fallback_on_eperm = true});
  add({.step = Step::kMountSys,
       .kind = ChildOp::kMount,
       .source = "tmpfs",
       .target = "sys",
       .fstype = "tmpfs",
       .flags = MS_RDONLY | kNoSuidDevExec,
       .data = "size=0,mode=555"});

  // /dev: small tmpfs; device nodes are bound from the host.
  add({.step = Step::kMountDev,
       .kind = ChildOp::kMount,
       .source = "tmpfs",
       .target = "dev",
       .fstype = "tmpfs",
       .flags = MS_NOSUID | MS_NOEXEC,
       .data = "mode=755,size=64k"});
  for (const char* d : kDevices) {
    const char* target = s->Intern(std::string("dev/") + d);
    add({.step = Step::kMountDev, .kind = ChildOp::kCreateFile, .target = target, .mode = 0666});
    add({.step = Step::kMountDev,
         .kind = ChildOp::kMount,
         .source = s->Intern(std::string("/dev/") + d),
         .target = target,
         .flags = MS_BIND});
  }
  add({.step = Step::kMountDev, .kind = ChildOp::kMkdir, .target = "dev/pts", .mode = 0755});
  // newinstance: the sandbox's ptys are its own, not the host's. gid 5 is 'tty'.
  add({.step = Step::kMountDev,
       .kind = ChildOp::kMount,
       .source = "devpts",
       .target = "dev/pts",
       .fstype = "devpts",
       .flags = MS_NOSUID | MS_NOEXEC,
       .data = "newinstance,ptmxmode=0666,mode=0620,gid=5"});
  add({.step = Step::kMountDev,
       .kind = ChildOp::kSymlink,
       .source = "pts/ptmx",
       .target = "dev/ptmx"});
  add({.step = Step::kMountDev, .kind = ChildOp::kMkdir, .target = "dev/shm", .mode = 01777});
  // /dev/shm pages are charged to the sandbox's memory cgroup; the size cap keeps one
  // sandbox's shm from being larger than its memory limit anyway.
  add({.step = Step::kMountDev,
       .kind = ChildOp::kMount,
       .source = "tmpfs",
       .target = "dev/shm",
       .fstype = "tmpfs",
       .flags = MS_NOSUID | MS_NODEV,
       .data = s->Intern("mode=1777,size=" + options.dev_shm_size)});
  add({.step = Step::kMountDev,
       .kind = ChildOp::kSymlink,
       .source = "/proc/self/fd",
       .target = "dev/fd"});
  add({.step = Step::kMountDev,
       .kind = ChildOp::kSymlink,
       .source = "/proc/self/fd/0",
       .target = "dev/stdin"});
  add({.step = Step::kMountDev,
       .kind = ChildOp::kSymlink,
       .source = "/proc/self/fd/1",
       .target = "dev/stdout"});
  add({.step = Step::kMountDev,
       .kind = ChildOp::kSymlink,
       .source = "/proc/self/fd/2",
       .target = "dev/stderr"});
}

int ChildMakePrivate(Call* call) {
  *call = Call::kMount;
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  return 0;
}

int ChildAttachRoot(int mount_fd, const char* root_dir, Call* call) {
  *call = Call::kMoveMount;
  if (::syscall(SYS_move_mount, mount_fd, "", AT_FDCWD, root_dir, MOVE_MOUNT_F_EMPTY_PATH) != 0) {
    return errno;
  }
  // The mount fd names the root of the now-attached mount: entering through it cannot
  // land anywhere else, whatever happens to the path.
  *call = Call::kFchdir;
  if (::fchdir(mount_fd) != 0) return errno;
  return 0;
}

int ChildRunOp(const ChildOp& op, Call* call) {
  int rc = 0;
  switch (op.kind) {
    case ChildOp::kMount:
      *call = Call::kMount;
      rc = ::mount(op.source, op.target, op.fstype, op.flags, op.data);
      break;
    case ChildOp::kRemountReadOnly:
      *call = Call::kMount;
      rc = ::mount(nullptr, op.target, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | op.flags,
                   nullptr);
      break;
    case ChildOp::kMkdir:
      *call = Call::kMkdir;
      rc = ::mkdir(op.target, op.mode);
      if (rc != 0 && errno == EEXIST) rc = 0;
      break;
    case ChildOp::kCreateFile:
      *call = Call::kMknod;
      rc = ::mknod(op.target, S_IFREG | op.mode, 0);
      break;
    case ChildOp::kSymlink:
      *call = Call::kSymlink;
      rc = ::symlink(op.source, op.target);
      break;
    case ChildOp::kMountPoint: {
      *call = Call::kMkdir;
      if (::mkdir(op.target, op.mode) != 0 && errno != EEXIST) return errno;
      *call = Call::kOpen;
      open_how how{};
      how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
      how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
      long fd = ::syscall(SYS_openat2, AT_FDCWD, op.target, &how, sizeof how);
      if (fd < 0) return errno;
      ::close(static_cast<int>(fd));
      break;
    }
    case ChildOp::kAttachVolume:  // needs the volume's descriptor: ChildAttachVolume
      *call = Call::kMoveMount;
      return EINVAL;
  }
  if (rc == 0) return 0;
  int err = errno;
  if (err == ENOENT && op.optional) return 0;
  return err;
}

int ChildAttachVolume(int mount_fd, const char* target, Call* call) {
  char path[kMaxVolumePathLen + 1];
  const size_t n = ::strnlen(target, sizeof path);
  *call = Call::kOpen;
  if (n == 0 || n > kMaxVolumePathLen) {
    ::close(mount_fd);
    return EINVAL;
  }
  std::memcpy(path, target, n);
  path[n] = '\0';
  int dir = AT_FDCWD;
  char* component = path;
  int err = 0;
  for (;;) {
    char* slash = std::strchr(component, '/');
    if (slash != nullptr) *slash = '\0';
    *call = Call::kMkdir;
    if (::mkdirat(dir, component, 0755) != 0 && errno != EEXIST) {
      err = errno;
      break;
    }
    *call = Call::kOpen;
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    long next = ::syscall(SYS_openat2, dir, component, &how, sizeof how);
    if (next < 0) {
      err = errno;
      break;
    }
    if (dir != AT_FDCWD) ::close(dir);
    dir = static_cast<int>(next);
    if (slash == nullptr) break;
    component = slash + 1;
  }
  if (err == 0) {
    *call = Call::kMoveMount;
    if (::syscall(SYS_move_mount, mount_fd, "", dir, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
      err = errno;
    }
  }
  if (dir != AT_FDCWD) ::close(dir);
  ::close(mount_fd);
  return err;
}

int ChildPivotRoot(Call* call) {
  // pivot_root(".", "."): the old root ends up stacked on the new one and is detached
  // right away, so no directory for it is needed (pivot_root(2), NOTES).
  *call = Call::kPivotRoot;
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return errno;
  *call = Call::kUmount2;
  if (::umount2(".", MNT_DETACH) != 0) return errno;
  *call = Call::kChdir;
  if (::chdir("/") != 0) return errno;
  return 0;
}

}  // namespace space::runtime::ns
