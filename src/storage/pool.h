// The node's storage pool: read-only templates pinned by digest and writable copy-on-write
// sandbox roots cloned from them.
//
// Layout under <data-dir>:
//   pool/                    btrfs (native, or a loop-backed image pool.img mounted here)
//     templates/sha256-<hex>    read-only subvolume per template digest
//     templates/index.json      name -> digest, size, created_at
//     sandboxes/<sbx_id>        writable snapshot of the template (the sandbox root)
//     sandboxes/.<sbx_id>.new   a rollback in progress (see ReplaceRootFromSnapshot)
//     snapshots/<snap_id>       read-only snapshot of a sandbox root (btrfs only)
//     volumes/<vol_id>          a volume: writable subvolume with its own qgroup limit (btrfs only)
//     volumes/<vol_id>.<suffix> a read-only view or sync point of one (node/volumes.h)
// Overlay fallback (no btrfs possible): templates are plain directories and a sandbox root is
// an overlayfs mount of the template (lower) and sandboxes/<id>/{upper,work}.
//
// Owned by the node agent. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/privileged_acts.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "storage/digest.h"

namespace space::storage {

struct TemplateInfo {
  std::string name;          // "base", "busybox", or an imported name
  std::string digest;        // "sha256:<64 hex>" over the tree (paths, types, modes, owners, contents)
  uint64_t size_bytes = 0;
  int64_t created_at_ms = 0;
  std::string path;          // host path of the read-only tree
  std::string team;          // who built it from a recipe; "" for built-ins and imports (the admin's)
  // Digests the name held before (newest first, at most kMaxEarlierDigests): `name@digest`
  // still resolves to one while its tree is in the pool.
  std::vector<std::string> earlier_digests;
};
inline constexpr size_t kMaxEarlierDigests = 16;

// Progress of long work (template builds), one human-readable line per call.
using ProgressFn = std::function<void(const std::string& line)>;

// Runs one step of a template's build over the tree being built at `tree_dir`. The node's
// runner starts it in a user namespace of its own, as root there only (node/build_jail.h), so
// that neither a build tool, nor the maintainer scripts of the packages debootstrap installs,
// nor an imported tarball's members, nor a tree's planted symlinks reach a host privilege.
//
// `argv(target)` is the step's command line when it sees the tree at `target`: a program (an
// absolute path), or "@<name>" for one of the builder's own steps (template_builder.h
// RunTreeStep), which the runner runs in its own process. Every line it prints goes to `on_line`.
using ToolArgv = std::function<std::vector<std::string>(const std::string& target)>;
struct ToolRun {
  ToolArgv argv;
  int stdin_fd = -1;          // the step's stdin (a tarball, a pipe); -1: /dev/null. Stays the caller's.
  // A directory the step reads (an import's source, any descriptor of it, O_PATH will do): the
  // step starts with it as its working directory, seen as the tree is (the node's jail reads it
  // through a read-only idmapped clone the root broker makes). -1: none. Stays the caller's.
  int source_dir_fd = -1;
  bool network = false;       // debootstrap downloads; no other step gets a network
  bool bind_devices = false;  // debootstrap needs dev/null and friends in the tree
};
using ToolRunner = std::function<Status(const std::string& tree_dir, const ToolRun& run, const ProgressFn& on_line)>;

// Computes a new template tree's digest (storage/digest.h DigestTree). The node's reads it in
// the tree jail (node/tree_jail.h): a template holds files of other owners (a Debian tree's
// 0700 directories of _apt, say), which only CAP_DAC_READ_SEARCH reads from outside.
using TreeDigester = std::function<Result<TreeDigest>(const std::string& tree_dir)>;

struct PoolConfig {
  std::string data_dir;                        // e.g. /var/lib/space
  uint64_t loop_image_bytes = 64ull << 30;     // sparse size of pool.img when the host is not btrfs
  bool force_overlay = false;                  // skip btrfs (tests of the fallback)
  // Runs every step that writes a new template's tree. Empty: busybox and imports run here,
  // as the caller (template_builder.h RunToolHere), and "base" cannot be built.
  ToolRunner build_runner;
  TreeDigester digester;                       // empty: DigestTree here
  // Where template imports may read: one or more roots joined by ':' (SplitImportRoots); a
  // source path is resolved inside the root it is below as if that were "/" (openat2
  // RESOLVE_IN_ROOT: neither ".." nor a symlink leads out). "/" (the default): anywhere.
  std::string import_root = "/";
  // Opens an import's source (as OpenImportSource does, inside import_root). The node's asks its
  // root broker, which may read an admin's root-only tarball or directory; the node may not.
  // Empty: OpenImportSource here.
  std::function<Result<UniqueFd>(const std::string& source)> import_opener;
  // Who makes, deletes, snapshots and limits subvolumes the node may not (common/
  // privileged_acts.h: the root broker). Null: the pool does it itself. Not owned.
  PrivilegedActs* privileged = nullptr;
};

// A pool brought into service (pool_mount.h MountPool).
struct PoolMount {
  std::string pool_dir;        // <data_dir>/pool
  bool btrfs = false;          // false: overlay fallback
  bool quota_enabled = false;  // btrfs qgroups on (disk limits enforceable)
};

class Pool {
 public:
  // Mounts or creates the pool (native btrfs, loop-backed btrfs, else overlay fallback).
  // Idempotent across restarts: an existing pool mount is reused.
  static Result<std::unique_ptr<Pool>> Open(const PoolConfig& config);
  // The same over a pool MountPool has already brought into service.
  static Result<std::unique_ptr<Pool>> OpenMounted(const PoolConfig& config, const PoolMount& mounted);
  virtual ~Pool() = default;

  virtual std::string kind() const = 0;  // "btrfs" or "overlay"

  // Templates. Built-ins ("busybox", "base") are built on first Ensure, with progress.
  virtual Result<TemplateInfo> EnsureTemplate(const std::string& name, const ProgressFn& progress) = 0;
  virtual Result<TemplateInfo> ImportTemplate(const std::string& name, const std::string& dir_or_tarball,
                                              const ProgressFn& progress) = 0;
  // The same from a tarball the caller holds open as `tarball_fd` (a flattened container
  // image, node/templates.h ImportImage); `label` names it in messages.
  virtual Result<TemplateInfo> ImportTemplateTarball(const std::string& name, int tarball_fd, const std::string& label,
                                                     const ProgressFn& progress) = 0;
  virtual Result<std::vector<TemplateInfo>> ListTemplates() = 0;
  virtual Result<TemplateInfo> GetTemplate(const std::string& name) = 0;  // not_found when absent

  // Built templates (node/template_builds.h). A build layer is a read-only tree pinned by its
  // digest like a template, with or without a name. btrfs only (unavailable otherwise).
  //
  // The host path of the tree with `digest` (it may not exist).
  virtual std::string TemplatePath(const std::string& digest) const = 0;
  virtual bool HasTemplateTree(const std::string& digest) = 0;
  // Pins a sandbox root as it is now as a read-only layer: an O(1) snapshot, digested, sealed
  // under its digest (shared with an identical existing tree). The caller has let the
  // root's writers finish. Returns the layer (no name).
  virtual Result<TemplateInfo> CommitRoot(const std::string& sandbox_id) = 0;
  // Points `name` at the existing tree `digest` (its previous digest joins earlier_digests).
  virtual Result<TemplateInfo> NameTemplate(const std::string& name, const std::string& digest,
                                            const std::string& team) = 0;
  // `name@digest`: the template when `digest` is its current or an earlier digest whose tree
  // is still here; not_found otherwise.
  virtual Result<TemplateInfo> ResolveTemplate(const std::string& name, const std::string& digest) = 0;
  // Forgets `name` and removes the trees of its digests that no other name holds. Roots
  // cloned from them are independent copies and stay.
  virtual Status RemoveTemplate(const std::string& name) = 0;
  // The layer cache: a build step's key (node/recipe.h StepCacheKey) -> the digest of the
  // layer it made. CachedLayer answers not_found for an unknown key or a tree gone since.
  virtual Result<std::string> CachedLayer(const std::string& key) = 0;
  virtual Status PutCachedLayer(const std::string& key, const std::string& digest) = 0;
  // Removes every layer no name holds (as its current or an earlier digest) and the cache
  // entries that led to them; returns how many trees went. The caller keeps builds from
  // running meanwhile (their layers have no name yet). btrfs only.
  virtual Result<uint64_t> CollectLayers() = 0;

  // Sandbox roots. CreateRoot clones the template with `digest` for `sandbox_id` and applies
  // the disk limit; returns the root's host path. DestroyRoot is idempotent.
  virtual Result<std::string> CreateRoot(const std::string& sandbox_id, const std::string& digest,
                                         uint64_t disk_limit_bytes) = 0;
  virtual Status DestroyRoot(const std::string& sandbox_id) = 0;
  virtual std::string RootPath(const std::string& sandbox_id) const = 0;
  // Changes the disk limit of an existing root (warm-pool hand-out).
  virtual Status SetRootDiskLimit(const std::string& sandbox_id, uint64_t disk_limit_bytes) = 0;
  virtual Result<std::vector<std::string>> ListRoots() = 0;

  // Snapshots of sandbox roots (snapshot, fork, rollback, diff). btrfs only: on the overlay
  // fallback every call but SnapshotPath answers unavailable.
  //
  // Read-only, O(1) snapshot of the sandbox's current root at snapshots/<snap_id>. The caller
  // freezes the sandbox around it for consistency. Returns the snapshot's host path.
  // btrfs writes the root's dirty page-cache data out first (~250 ms for 200 MiB dirty vs
  // ~3 ms clean, snapshot_test.cc), so a caller keeping the freeze short syncfs()es the root
  // before freezing.
  virtual Result<std::string> SnapshotRoot(const std::string& sandbox_id, const std::string& snap_id) = 0;
  virtual Status DeleteSnapshot(const std::string& snap_id) = 0;
  // Brings back a snapshot that is not present locally (restore from the snapshot store):
  // `fill` writes the tree into an empty directory, which then becomes the read-only
  // snapshots/<snap_id>. Nothing is left behind when `fill` fails.
  virtual Status ImportSnapshot(const std::string& snap_id,
                                const std::function<Status(const std::string& dir)>& fill) = 0;  // idempotent
  virtual std::string SnapshotPath(const std::string& snap_id) const = 0;
  virtual Result<std::vector<std::string>> ListSnapshots() = 0;  // snap ids present
  // A new sandbox root (writable) cloned from a snapshot, with the disk limit applied.
  // Independent of the snapshot afterwards: deleting the snapshot leaves the root intact.
  virtual Result<std::string> CreateRootFromSnapshot(const std::string& sandbox_id, const std::string& snap_id,
                                                     uint64_t disk_limit_bytes) = 0;
  // Rollback: replaces the sandbox's root by a writable clone of the snapshot. A crash leaves
  // either the old root or the new one at the root path, never neither: the clone is made at
  // sandboxes/.<id>.new and swapped in with one renameat2(RENAME_EXCHANGE); Open finishes or
  // undoes an interrupted swap. The caller has stopped the sandbox (nothing may hold the old
  // root open or mounted). Applies `disk_limit_bytes` to the new root.
  virtual Status ReplaceRootFromSnapshot(const std::string& sandbox_id, const std::string& snap_id,
                                         uint64_t disk_limit_bytes) = 0;
  // Bytes exclusively referenced by a snapshot (what deleting it frees; btrfs qgroup "excl"
  // when quotas are on, as of the last transaction commit), 0 if unknown.
  virtual uint64_t SnapshotExclusiveBytes(const std::string& snap_id) = 0;

  // Volumes (node/volumes.h): subvolumes in volumes/, btrfs only (unavailable otherwise). Names
  // are one component of [A-Za-z0-9_.-]. CreateVolume makes an empty one whose top every
  // sandbox user may write (0777), limited to `limit_bytes` (0: no limit).
  virtual Status CreateVolume(const std::string& name, uint64_t limit_bytes) = 0;
  // `dest` as an O(1) snapshot of volume `source`: read-only (a view for read-only mounts, a
  // sync point) or writable (a fork, limited to `limit_bytes`).
  virtual Status SnapshotVolume(const std::string& source, const std::string& dest, bool read_only,
                                uint64_t limit_bytes) = 0;
  // Volume `name` as a writable clone of pool snapshot `snap_id` (a volume pulled from the store).
  virtual Status CreateVolumeFromSnapshot(const std::string& name, const std::string& snap_id,
                                          uint64_t limit_bytes) = 0;
  virtual Status SetVolumeLimit(const std::string& name, uint64_t limit_bytes) = 0;
  virtual Status DestroyVolume(const std::string& name) = 0;  // idempotent
  virtual std::string VolumePath(const std::string& name) const = 0;
  virtual bool HasVolume(const std::string& name) = 0;
  virtual Result<std::vector<std::string>> ListVolumes() = 0;

  // Disk limits hold only while btrfs quota accounting is exact: when the kernel has marked it
  // inconsistent, starts a rescan and logs it. Cheap (one sysfs read); the node calls it every
  // second. No-op without btrfs quotas.
  virtual void CheckDiskAccounting() {}
};

}  // namespace space::storage
