// Mount namespace: the sandbox's root (an idmapped mount of its rootfs), /proc with
// host-revealing paths masked, read-only /sys, a minimal /dev; then pivot_root.
//
// Parent-side functions run in the node before/after clone; Child* functions run in the
// cloned child and are async-signal-safe.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "common/privileged_acts.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "runtime/ns/child_plan.h"
#include "runtime/ns/steps.h"

namespace space::runtime::ns {

// Directories the runtime mounts over inside the sandbox root.
inline constexpr const char* kMountPointDirs[] = {"proc", "sys", "dev", "tmp"};

// Opens the rootfs directory (a node-chosen, trusted path) as O_PATH.
Result<UniqueFd> OpenRootfs(const std::string& rootfs);

// Makes sure each kMountPointDirs entry is a real directory directly under the root,
// creating missing ones. The root's contents are sandbox-controlled, so nothing is
// resolved through a symlink (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS): a symlink or
// non-directory there is kInvalidArgument. A missing one this process may not make (the node
// is not the root's owner: it is not uid 0), or one it may not even look up (a root its
// sandbox made 0700), goes in `*child_makes`, for the sandbox's init to make and check as root
// of its namespace (AppendMountOps, ChildOp::kMountPoint); nothing else can write the tree
// meanwhile.
Status EnsureMountPoints(int rootfs_fd, std::vector<const char*>* child_makes);

// Clones the rootfs as a detached mount and idmaps it to `userns_fd`'s mapping, so
// on-disk uid 0 appears as uid 0 inside the sandbox (host uid_base). Also nodev and
// nosuid: device nodes in a template must not open host devices.
Result<UniqueFd> MakeIdmappedRoot(int rootfs_fd, int userns_fd, bool read_only = false);

// The same for the user namespace of the child `pid` (pidfd `pidfd`), which maps root to the
// uid slot starting at `uid_base`. Cloning a tree takes CAP_SYS_ADMIN on the host, which the
// node leaves to its root broker (`acts`; the broker's idmap_tree clones only its pool's
// sandbox roots and template builds); with no `acts`, this process makes the clone itself.
struct IdmapRequest {
  int dir_fd = -1;
  int pidfd = -1;
  pid_t pid = -1;
  uint32_t uid_base = 0;
  bool read_only = false;  // MOUNT_ATTR_RDONLY as well (a snapshot read by the tree jail)
};
Result<UniqueFd> IdmapTree(PrivilegedActs* acts, const IdmapRequest& request);

struct MountPlanOptions {
  std::string dev_shm_size;  // tmpfs size= for /dev/shm, e.g. "536870912"
};

// Appends the child's mount ops (mount_proc, mask_proc, mount_sys, mount_dev), all
// relative to the sandbox root, after making and checking each of `make_first`
// (EnsureMountPoints).
void AppendMountOps(const MountPlanOptions& options, const std::vector<const char*>& make_first, PlanStorage* storage);

// Child side: makes every mount in the (copied) namespace private so nothing propagates
// back to the host.
int ChildMakePrivate(Call* call);
// Child side: attaches the idmapped root (received from the parent) onto `root_dir`
// and makes it the cwd, so later ops can use relative paths.
int ChildAttachRoot(int mount_fd, const char* root_dir, Call* call);
// Child side: runs one op. ENOENT on an optional op counts as success.
int ChildRunOp(const ChildOp& op, Call* call);
// Child side: attaches the detached mount `mount_fd` at `target` (relative to the cwd, the
// sandbox root: components joined by '/', at most kMaxVolumePathLen bytes), making missing
// directories on the way (0755). No component is resolved through a symlink or out of the
// root (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, one component at a time): the root's
// contents are the sandbox's. Closes `mount_fd`.
int ChildAttachVolume(int mount_fd, const char* target, Call* call);
// Child side: pivot_root(".", ".") + detach the old root; cwd becomes "/".
int ChildPivotRoot(Call* call);

}  // namespace space::runtime::ns
