// ChildPlan: everything the sandbox's first process needs between clone() and exec,
// computed by the parent beforehand.
//
// The node is multi-threaded, so the cloned child may only make async-signal-safe calls:
// no allocation, no locks, no std::string. The parent therefore builds every path, mount
// argument, argv/envp and the seccomp program up front; the child only walks this plan.
// A PlanStorage owns the memory; the child reads its copy-on-write copy of it. Built and
// used by one Launch call (thread-compatible).
#pragma once

#include <linux/filter.h>
#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "runtime/ns/steps.h"

namespace space::runtime::ns {

// One filesystem operation of the child's mount setup, relative to the child's cwd (the
// root of the sandbox's mount) unless the path is absolute (host paths such as /dev/null,
// valid until pivot_root).
struct ChildOp {
  enum Kind : uint8_t {
    kMount,            // mount(source, target, fstype, flags, data)
    kRemountReadOnly,  // mount(NULL, target, NULL, MS_REMOUNT|MS_BIND|MS_RDONLY|flags)
    kMkdir,            // mkdir(target, mode); EEXIST tolerated
    kCreateFile,       // mknod(target, S_IFREG|mode): an empty file to bind a device onto
    kSymlink,          // symlink(source, target)
    // A mount point of the root's, directly under it: mkdir(target, mode) if missing, then
    // it must open as a directory without following a link (openat2 RESOLVE_BENEATH |
    // RESOLVE_NO_SYMLINKS), else ELOOP or ENOTDIR. For what the node could not check itself.
    kMountPoint,
    // Attaches the detached mount of volume `fd_index` (the descriptors that came with "go",
    // after the root's) at `target`, a path of one or more components under the root, making
    // the missing ones (ChildAttachVolume).
    kAttachVolume,
  };
  Step step = Step::kMountProc;
  Kind kind = kMount;
  const char* source = nullptr;
  const char* target = nullptr;
  const char* fstype = nullptr;
  unsigned long flags = 0;
  const char* data = nullptr;
  mode_t mode = 0;
  // The target may not exist on this kernel (e.g. /proc/timer_stats): ENOENT skips the op.
  bool optional = false;
  // If this op fails with EPERM, report a note and run the next op (its fallback);
  // otherwise skip the next op.
  bool fallback_on_eperm = false;
  int fd_index = -1;  // kAttachVolume
};

// The most volumes one sandbox mounts, and the longest path one is mounted at.
inline constexpr size_t kMaxVolumeMounts = 8;
inline constexpr size_t kMaxVolumePathLen = 1024;

struct ChildPlan {
  int sync_fd = -1;                // child end of the sync socket (CLOEXEC)
  int channel_fd = -1;             // child end of the guest channel; becomes fd 3
  int guest_fd = -1;               // the guest binary (O_RDONLY|O_CLOEXEC); executed with execveat
  const char* root_dir = nullptr;  // <run_dir>/<id>/root, where the sandbox root is attached
  const char* hostname = nullptr;
  size_t hostname_len = 0;
  const ChildOp* ops = nullptr;
  size_t n_ops = 0;
  size_t n_volumes = 0;  // volume mount descriptors that come with "go", after the root's
  sock_fprog seccomp{};  // points into PlanStorage::seccomp
  char* const* argv = nullptr;
  char* const* envp = nullptr;
};

// Owns the strings and arrays a ChildPlan points into. Not copyable: the plan holds raw
// pointers into it.
class PlanStorage {
 public:
  PlanStorage() = default;
  PlanStorage(const PlanStorage&) = delete;
  PlanStorage& operator=(const PlanStorage&) = delete;

  // Stores `s` and returns a stable NUL-terminated pointer to it.
  const char* Intern(std::string s) { return strings_.emplace_back(std::move(s)).c_str(); }

  std::vector<ChildOp> ops;
  std::vector<sock_filter> seccomp;
  std::vector<char*> argv;
  std::vector<char*> envp;

 private:
  std::deque<std::string> strings_;  // deque: growth never moves existing strings
};

}  // namespace space::runtime::ns
