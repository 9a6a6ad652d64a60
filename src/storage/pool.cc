// Pool: ties the mounted pool (pool_mount.cc), the storage backend (btrfs or overlay), the
// template builders and the template index together.

#include "storage/pool.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>

#include <algorithm>
#include <mutex>
#include <set>

#include "common/clock.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/random.h"
#include "storage/backend.h"
#include "storage/btrfs.h"
#include "storage/digest.h"
#include "storage/fs_util.h"
#include "storage/names.h"
#include "storage/pool_mount.h"
#include "storage/template_builder.h"
#include "storage/template_index.h"

namespace space::storage {
namespace {

constexpr char kLog[] = "storage";
constexpr char kScratchPrefix[] = "tmp-";
constexpr char kTemplatePrefix[] = "sha256-";
// Rollback staging names next to sandboxes/<id>. The leading dot keeps them out of the id
// space: ValidateSandboxId never accepts a '.'.
constexpr char kNewSuffix[] = ".new";
constexpr char kOldSuffix[] = ".old";

using TreeBuilder = std::function<Status(const std::string& dir, const ProgressFn& progress)>;

std::function<Result<UniqueFd>(const std::string&)> ImportOpenerOf(const PoolConfig& config) {
  if (config.import_opener) return config.import_opener;
  return [root = config.import_root](const std::string& source) { return OpenImportSource(root, source); };
}

class PoolImpl final : public Pool {
 public:
  PoolImpl(std::string pool_dir, std::unique_ptr<Backend> backend, bool btrfs_quota, ToolRunner build_runner,
           TreeDigester digester, std::function<Result<UniqueFd>(const std::string&)> import_opener,
           PrivilegedActs* privileged)
      : pool_dir_(pool_dir),
        privileged_(privileged),
        btrfs_quota_(btrfs_quota),
        templates_dir_(pool_dir + "/templates"),
        sandboxes_dir_(pool_dir + "/sandboxes"),
        snapshots_dir_(pool_dir + "/snapshots"),
        volumes_dir_(pool_dir + "/volumes"),
        index_path_(templates_dir_ + "/index.json"),
        layers_path_(templates_dir_ + "/layers.json"),
        backend_(std::move(backend)),
        build_runner_(std::move(build_runner)),
        digester_(std::move(digester)),
        import_opener_(std::move(import_opener)) {}

  void CheckDiskAccounting() override {
    if (!btrfs_quota_) return;
    auto started = RescanIfInconsistent(privileged_, pool_dir_);
    if (!started.ok()) {
      LogWarn(kLog, "checking btrfs quota accounting: " + started.status().ToString());
    } else if (*started) {
      LogWarn(kLog, "btrfs quota accounting turned inconsistent (the kernel drops a deleted sandbox's qgroup "
                    "before its numbers reach zero); started a rescan: disk limits are approximate until it ends");
    }
  }

  // Recovers from a crash or reboot: drops half-built templates, finishes or undoes
  // interrupted rollbacks, remounts overlay roots.
  Status Recover() {
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(templates_dir_));
    for (const auto& n : names) {
      if (n.rfind(kScratchPrefix, 0) != 0) continue;
      LogInfo(kLog, "removing unfinished template build " + n);
      RETURN_IF_ERROR(backend_->RemoveTree(templates_dir_ + "/" + n));
    }
    ASSIGN_OR_RETURN(std::vector<std::string> snaps, ListDir(snapshots_dir_));
    for (const auto& n : snaps) {
      if (n.rfind(kScratchPrefix, 0) != 0) continue;
      LogInfo(kLog, "removing unfinished snapshot import " + n);
      RETURN_IF_ERROR(backend_->RemoveTree(snapshots_dir_ + "/" + n));
    }
    RETURN_IF_ERROR(RecoverRollbacks());
    ASSIGN_OR_RETURN(std::vector<std::string> roots, ListRoots());
    for (const auto& id : roots) {
      Status st = backend_->RestoreRoot(templates_dir_, sandboxes_dir_ + "/" + id);
      if (!st.ok()) LogWarn(kLog, "cannot restore root " + id + ": " + st.ToString());
    }
    return Status::Ok();
  }

  std::string kind() const override { return backend_->kind(); }

  Result<TemplateInfo> EnsureTemplate(const std::string& name, const ProgressFn& progress) override {
    RETURN_IF_ERROR(ValidateTemplateName(name));
    TreeBuilder builder;
    if (name == "busybox") {
      builder = [this](const std::string& dir, const ProgressFn& progress) {
        return BuildBusyboxTree(dir, Runner(), progress);
      };
    }
    if (name == "base") {
      builder = [this](const std::string& dir, const ProgressFn& progress) {
        return BuildBaseTree(dir, build_runner_, progress);
      };
    }
    // Serialized: two concurrent Ensure("base") build once; the second finds the first's.
    std::lock_guard<std::mutex> build(build_mu_);
    Result<TemplateInfo> existing = GetTemplate(name);
    if (existing.ok() || existing.status().code() != StatusCode::kNotFound || !builder) return existing;
    return BuildLocked(name, builder, progress);
  }

  Result<TemplateInfo> ImportTemplate(const std::string& name, const std::string& dir_or_tarball,
                                      const ProgressFn& progress) override {
    RETURN_IF_ERROR(ValidateTemplateName(name));
    ASSIGN_OR_RETURN(UniqueFd source, import_opener_(dir_or_tarball));
    std::lock_guard<std::mutex> build(build_mu_);
    return BuildLocked(
        name,
        [&](const std::string& dir, const ProgressFn& p) {
          return ImportTree(source.get(), dir_or_tarball, dir, Runner(), p);
        },
        progress);
  }

  Result<TemplateInfo> ImportTemplateTarball(const std::string& name, int tarball_fd, const std::string& label,
                                             const ProgressFn& progress) override {
    RETURN_IF_ERROR(ValidateTemplateName(name));
    std::lock_guard<std::mutex> build(build_mu_);
    return BuildLocked(
        name,
        [&](const std::string& dir, const ProgressFn& p) { return ImportTree(tarball_fd, label, dir, Runner(), p); },
        progress);
  }

  Result<std::vector<TemplateInfo>> ListTemplates() override {
    std::lock_guard<std::mutex> lock(index_mu_);
    ASSIGN_OR_RETURN(TemplateIndex index, LoadTemplateIndex(index_path_));
    std::vector<TemplateInfo> out;
    for (auto& [name, info] : index) out.push_back(WithPath(info));
    return out;
  }

  Result<TemplateInfo> GetTemplate(const std::string& name) override {
    RETURN_IF_ERROR(ValidateTemplateName(name));
    std::lock_guard<std::mutex> lock(index_mu_);
    ASSIGN_OR_RETURN(TemplateIndex index, LoadTemplateIndex(index_path_));
    auto it = index.find(name);
    if (it == index.end()) return NotFound("template '" + name + "' not found");
    return WithPath(it->second);
  }

  std::string TemplatePath(const std::string& digest) const override {
    auto hex = DigestHex(digest);
    return hex.ok() ? templates_dir_ + "/" + kTemplatePrefix + *hex : std::string();
  }

  bool HasTemplateTree(const std::string& digest) override {
    std::string path = TemplatePath(digest);
    return !path.empty() && PathExists(path);
  }

  Result<TemplateInfo> CommitRoot(const std::string& sandbox_id) override {
    RETURN_IF_ERROR(ValidateSandboxId(sandbox_id));
    RETURN_IF_ERROR(RequireSnapshots());
    std::string root_dir = sandboxes_dir_ + "/" + sandbox_id;
    if (!PathExists(root_dir)) return NotFound("no root for sandbox " + sandbox_id);
    // A read-only snapshot under a scratch name (Recover removes it after a crash), digested
    // while nothing can change it, then sealed under its digest.
    std::string scratch = templates_dir_ + "/" + kScratchPrefix + RandomHex(8);
    RETURN_IF_ERROR(backend_->SnapshotRoot(root_dir, scratch));
    Result<TreeDigest> d = digester_ ? digester_(scratch) : DigestTree(scratch);
    Status st = d.status();
    TemplateInfo info;
    if (st.ok()) {
      info.digest = d->digest;
      info.size_bytes = d->size_bytes;
      info.created_at_ms = WallNowMs();
      info = WithPath(info);
      std::lock_guard<std::mutex> build(build_mu_);
      st = PathExists(info.path) ? backend_->RemoveTree(scratch) : backend_->Seal(scratch, info.path);
    }
    if (!st.ok()) {
      Status cleanup = backend_->RemoveTree(scratch);
      if (!cleanup.ok()) LogError(kLog, "cleanup of " + scratch + ": " + cleanup.ToString());
      return st.Annotate("commit root of " + sandbox_id);
    }
    return info;
  }

  Result<TemplateInfo> NameTemplate(const std::string& name, const std::string& digest,
                                    const std::string& team) override {
    RETURN_IF_ERROR(ValidateTemplateName(name));
    if (!HasTemplateTree(digest)) return NotFound("no template tree with digest " + digest);
    std::lock_guard<std::mutex> lock(index_mu_);
    ASSIGN_OR_RETURN(TemplateIndex index, LoadTemplateIndex(index_path_));
    TemplateInfo info;
    info.name = name;
    info.digest = digest;
    info.team = team;
    info.created_at_ms = WallNowMs();
    auto it = index.find(name);
    if (it != index.end() && it->second.digest == digest) info = it->second;  // a fully cached rebuild
    if (info.size_bytes == 0) {
      auto d = digester_ ? digester_(TemplatePath(digest)) : DigestTree(TemplatePath(digest));
      if (d.ok()) info.size_bytes = d->size_bytes;
    }
    info.team = team;
    RecordName(&index, info);
    RETURN_IF_ERROR(SaveTemplateIndex(index_path_, index));
    return WithPath(index[name]);
  }

  Result<TemplateInfo> ResolveTemplate(const std::string& name, const std::string& digest) override {
    ASSIGN_OR_RETURN(TemplateInfo info, GetTemplate(name));
    RETURN_IF_ERROR(DigestHex(digest).status());
    const bool known = info.digest == digest || std::find(info.earlier_digests.begin(), info.earlier_digests.end(),
                                                          digest) != info.earlier_digests.end();
    if (!known || !HasTemplateTree(digest)) return NotFound("template '" + name + "' has no digest " + digest);
    info.digest = digest;
    return WithPath(info);
  }

  Status RemoveTemplate(const std::string& name) override {
    RETURN_IF_ERROR(ValidateTemplateName(name));
    std::lock_guard<std::mutex> build(build_mu_);
    std::vector<std::string> trees;
    {
      std::lock_guard<std::mutex> lock(index_mu_);
      ASSIGN_OR_RETURN(TemplateIndex index, LoadTemplateIndex(index_path_));
      auto it = index.find(name);
      if (it == index.end()) return NotFound("template '" + name + "' not found");
      std::set<std::string> mine(it->second.earlier_digests.begin(), it->second.earlier_digests.end());
      mine.insert(it->second.digest);
      index.erase(it);
      for (const auto& [other, info] : index) {
        mine.erase(info.digest);
        for (const auto& d : info.earlier_digests) mine.erase(d);
      }
      RETURN_IF_ERROR(SaveTemplateIndex(index_path_, index));
      trees.assign(mine.begin(), mine.end());
    }
    for (const auto& d : trees) {
      Status st = backend_->RemoveTree(TemplatePath(d));
      if (!st.ok()) LogWarn(kLog, "removing tree " + d + " of template " + name + ": " + st.ToString());
    }
    return Status::Ok();
  }

  Result<std::string> CachedLayer(const std::string& key) override {
    std::lock_guard<std::mutex> lock(index_mu_);
    ASSIGN_OR_RETURN(LayerCache cache, LoadLayerCache(layers_path_));
    auto it = cache.find(key);
    if (it == cache.end() || !HasTemplateTree(it->second)) return NotFound("no cached layer");
    return it->second;
  }

  Status PutCachedLayer(const std::string& key, const std::string& digest) override {
    RETURN_IF_ERROR(DigestHex(digest).status());
    std::lock_guard<std::mutex> lock(index_mu_);
    ASSIGN_OR_RETURN(LayerCache cache, LoadLayerCache(layers_path_));
    // Bounded: entries whose tree is gone go first, then the first keys in order.
    if (cache.size() >= kMaxCachedLayers)
      std::erase_if(cache, [&](const auto& e) { return !HasTemplateTree(e.second); });
    while (cache.size() >= kMaxCachedLayers) cache.erase(cache.begin());
    cache[key] = digest;
    return SaveLayerCache(layers_path_, cache);
  }

  Result<uint64_t> CollectLayers() override {
    RETURN_IF_ERROR(RequireSnapshots());
    std::lock_guard<std::mutex> build(build_mu_);
    std::set<std::string> held;
    {
      std::lock_guard<std::mutex> lock(index_mu_);
      ASSIGN_OR_RETURN(TemplateIndex index, LoadTemplateIndex(index_path_));
      for (const auto& [name, info] : index) {
        for (const auto& d : info.earlier_digests) held.insert(TemplatePath(d));
        held.insert(TemplatePath(info.digest));
      }
    }
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(templates_dir_));
    uint64_t removed = 0;
    for (const auto& n : names) {
      const std::string path = templates_dir_ + "/" + n;
      if (n.rfind(kTemplatePrefix, 0) != 0 || held.count(path)) continue;
      RETURN_IF_ERROR(backend_->RemoveTree(path).Annotate("collect layer " + n));
      ++removed;
    }
    std::lock_guard<std::mutex> lock(index_mu_);
    ASSIGN_OR_RETURN(LayerCache cache, LoadLayerCache(layers_path_));
    std::erase_if(cache, [&](const auto& e) { return !HasTemplateTree(e.second); });
    RETURN_IF_ERROR(SaveLayerCache(layers_path_, cache));
    return removed;
  }

  Result<std::string> CreateRoot(const std::string& sandbox_id, const std::string& digest,
                                 uint64_t disk_limit_bytes) override {
    RETURN_IF_ERROR(ValidateSandboxId(sandbox_id));
    ASSIGN_OR_RETURN(std::string hex, DigestHex(digest));
    std::string tmpl = templates_dir_ + "/" + kTemplatePrefix + hex;
    if (!PathExists(tmpl)) return NotFound("no template with digest " + digest);
    std::string root_dir = sandboxes_dir_ + "/" + sandbox_id;
    if (PathExists(root_dir)) return Conflict("root for sandbox " + sandbox_id + " already exists");
    return backend_->CreateRoot(tmpl, root_dir, disk_limit_bytes);
  }

  Status DestroyRoot(const std::string& sandbox_id) override {
    RETURN_IF_ERROR(ValidateSandboxId(sandbox_id));
    // Also a staging tree a failed rollback could not clean up (ReplaceRootFromSnapshot).
    RETURN_IF_ERROR(backend_->DestroyRoot(StagingDir(sandbox_id, kNewSuffix)));
    RETURN_IF_ERROR(backend_->DestroyRoot(StagingDir(sandbox_id, kOldSuffix)));
    return backend_->DestroyRoot(sandboxes_dir_ + "/" + sandbox_id);
  }

  std::string RootPath(const std::string& sandbox_id) const override {
    return backend_->RootPath(sandboxes_dir_ + "/" + sandbox_id);
  }

  Status SetRootDiskLimit(const std::string& sandbox_id, uint64_t disk_limit_bytes) override {
    RETURN_IF_ERROR(ValidateSandboxId(sandbox_id));
    return backend_->SetRootDiskLimit(sandboxes_dir_ + "/" + sandbox_id, disk_limit_bytes);
  }

  Result<std::vector<std::string>> ListRoots() override {
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(sandboxes_dir_));
    std::erase_if(names, [](const std::string& n) { return n.empty() || n[0] == '.'; });
    return names;
  }

  Result<std::string> SnapshotRoot(const std::string& sandbox_id, const std::string& snap_id) override {
    RETURN_IF_ERROR(ValidateSandboxId(sandbox_id));
    RETURN_IF_ERROR(ValidateSnapshotId(snap_id));
    RETURN_IF_ERROR(RequireSnapshots());
    std::string root_dir = sandboxes_dir_ + "/" + sandbox_id;
    if (!PathExists(root_dir)) return NotFound("no root for sandbox " + sandbox_id);
    std::string snap = SnapshotPath(snap_id);
    // A concurrent twin loses inside the backend with EEXIST (conflict) instead.
    if (PathExists(snap)) return Conflict("snapshot " + snap_id + " already exists");
    RETURN_IF_ERROR(backend_->SnapshotRoot(root_dir, snap));
    return snap;
  }

  Status DeleteSnapshot(const std::string& snap_id) override {
    RETURN_IF_ERROR(ValidateSnapshotId(snap_id));
    RETURN_IF_ERROR(RequireSnapshots());
    return backend_->RemoveTree(SnapshotPath(snap_id));
  }

  std::string SnapshotPath(const std::string& snap_id) const override { return snapshots_dir_ + "/" + snap_id; }

  Status ImportSnapshot(const std::string& snap_id, const std::function<Status(const std::string&)>& fill) override {
    RETURN_IF_ERROR(ValidateSnapshotId(snap_id));
    RETURN_IF_ERROR(RequireSnapshots());
    std::string snap = SnapshotPath(snap_id);
    if (PathExists(snap)) return Conflict("snapshot " + snap_id + " already exists");
    // Filled under a scratch name and sealed read-only in one step: a crash mid-import leaves
    // only a scratch tree, which Recover() removes, never a partial snapshot.
    std::string scratch = snapshots_dir_ + "/" + kScratchPrefix + snap_id;
    (void)backend_->RemoveTree(scratch);
    RETURN_IF_ERROR(backend_->CreateScratch(scratch));
    Status st = fill(scratch);
    if (st.ok()) st = backend_->Seal(scratch, snap);
    if (!st.ok()) {
      Status cleanup = backend_->RemoveTree(scratch);
      if (!cleanup.ok()) LogError(kLog, "cleanup of " + scratch + ": " + cleanup.ToString());
    }
    return st;
  }

  Status CreateVolume(const std::string& name, uint64_t limit_bytes) override {
    RETURN_IF_ERROR(ValidateVolumeDirName(name));
    RETURN_IF_ERROR(RequireSnapshots());
    const std::string dir = VolumePath(name);
    if (PathExists(dir)) return Conflict("volume " + name + " already exists in the pool");
    RETURN_IF_ERROR(backend_->CreateScratch(dir));
    // With the broker, it made the top 0777 (broker SubvolCreate); acting here, so do we.
    Status st =
        privileged_ != nullptr || ::chmod(dir.c_str(), 0777) == 0 ? Status::Ok() : ErrnoStatus("chmod", dir, errno);
    if (st.ok() && limit_bytes > 0) st = backend_->SetRootDiskLimit(dir, limit_bytes);
    if (!st.ok()) (void)backend_->RemoveTree(dir);
    return st;
  }

  Status SnapshotVolume(const std::string& source, const std::string& dest, bool read_only,
                        uint64_t limit_bytes) override {
    RETURN_IF_ERROR(ValidateVolumeDirName(source));
    RETURN_IF_ERROR(ValidateVolumeDirName(dest));
    RETURN_IF_ERROR(RequireSnapshots());
    const std::string from = VolumePath(source), to = VolumePath(dest);
    if (!PathExists(from)) return NotFound("volume " + source + " is not in this pool");
    if (PathExists(to)) return Conflict("volume " + dest + " already exists in the pool");
    if (read_only) return backend_->SnapshotRoot(from, to);
    return backend_->CreateRoot(from, to, limit_bytes).status();
  }

  Status CreateVolumeFromSnapshot(const std::string& name, const std::string& snap_id, uint64_t limit_bytes) override {
    RETURN_IF_ERROR(ValidateVolumeDirName(name));
    RETURN_IF_ERROR(ValidateSnapshotId(snap_id));
    RETURN_IF_ERROR(RequireSnapshots());
    const std::string snap = SnapshotPath(snap_id), to = VolumePath(name);
    if (!PathExists(snap)) return NotFound("snapshot " + snap_id + " not found");
    if (PathExists(to)) return Conflict("volume " + name + " already exists in the pool");
    return backend_->CreateRoot(snap, to, limit_bytes).status();
  }

  Status SetVolumeLimit(const std::string& name, uint64_t limit_bytes) override {
    RETURN_IF_ERROR(ValidateVolumeDirName(name));
    return backend_->SetRootDiskLimit(VolumePath(name), limit_bytes);
  }

  Status DestroyVolume(const std::string& name) override {
    RETURN_IF_ERROR(ValidateVolumeDirName(name));
    return backend_->RemoveTree(VolumePath(name));
  }

  std::string VolumePath(const std::string& name) const override { return volumes_dir_ + "/" + name; }

  bool HasVolume(const std::string& name) override {
    return ValidateVolumeDirName(name).ok() && PathExists(VolumePath(name));
  }

  Result<std::vector<std::string>> ListVolumes() override {
    if (!PathExists(volumes_dir_)) return std::vector<std::string>{};
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(volumes_dir_));
    std::erase_if(names, [](const std::string& n) { return !ValidateVolumeDirName(n).ok(); });
    return names;
  }

  Result<std::vector<std::string>> ListSnapshots() override {
    RETURN_IF_ERROR(RequireSnapshots());
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(snapshots_dir_));
    std::erase_if(names, [](const std::string& n) { return !ValidateSnapshotId(n).ok(); });
    return names;
  }

  Result<std::string> CreateRootFromSnapshot(const std::string& sandbox_id, const std::string& snap_id,
                                             uint64_t disk_limit_bytes) override {
    RETURN_IF_ERROR(ValidateSandboxId(sandbox_id));
    RETURN_IF_ERROR(ValidateSnapshotId(snap_id));
    RETURN_IF_ERROR(RequireSnapshots());
    std::string snap = SnapshotPath(snap_id);
    if (!PathExists(snap)) return NotFound("snapshot " + snap_id + " not found");
    std::string root_dir = sandboxes_dir_ + "/" + sandbox_id;
    if (PathExists(root_dir)) return Conflict("root for sandbox " + sandbox_id + " already exists");
    return backend_->CreateRoot(snap, root_dir, disk_limit_bytes);
  }

  // One renameat2(RENAME_EXCHANGE) instead of rename-aside + rename-in: the root path is never
  // empty, not even between two renames, and the old tree ends up at .<id>.new, which Open
  // deletes whenever the root path exists. So every crash point recovers to a whole root:
  // before the swap the old one, after it the new one.
  Status ReplaceRootFromSnapshot(const std::string& sandbox_id, const std::string& snap_id,
                                 uint64_t disk_limit_bytes) override {
    RETURN_IF_ERROR(ValidateSandboxId(sandbox_id));
    RETURN_IF_ERROR(ValidateSnapshotId(snap_id));
    RETURN_IF_ERROR(RequireSnapshots());
    // Two rollbacks of one sandbox would share the staging path.
    std::lock_guard<std::mutex> lock(rollback_mu_);
    std::string snap = SnapshotPath(snap_id);
    if (!PathExists(snap)) return NotFound("snapshot " + snap_id + " not found");
    std::string root_dir = sandboxes_dir_ + "/" + sandbox_id;
    if (!PathExists(root_dir)) return NotFound("no root for sandbox " + sandbox_id);
    std::string staging = StagingDir(sandbox_id, kNewSuffix);
    RETURN_IF_ERROR(backend_->DestroyRoot(staging));  // left by an earlier failed attempt
    Result<std::string> fresh = backend_->CreateRoot(snap, staging, disk_limit_bytes);
    if (!fresh.ok()) return fresh.status().Annotate("rollback of " + sandbox_id);
    if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, root_dir.c_str(), RENAME_EXCHANGE) != 0) {
      Status st = ErrnoStatus("renameat2 RENAME_EXCHANGE", staging + " <-> " + root_dir, errno);
      Status cleanup = backend_->DestroyRoot(staging);
      if (!cleanup.ok()) LogError(kLog, "cleanup of " + staging + ": " + cleanup.ToString());
      return st;
    }
    // The rollback is done; a leftover old tree only costs space until DestroyRoot or Open.
    Status st = backend_->DestroyRoot(staging);
    if (!st.ok()) LogWarn(kLog, "old root of " + sandbox_id + " left at " + staging + ": " + st.ToString());
    return Status::Ok();
  }

  uint64_t SnapshotExclusiveBytes(const std::string& snap_id) override {
    if (!ValidateSnapshotId(snap_id).ok() || !backend_->has_snapshots()) return 0;
    std::string snap = SnapshotPath(snap_id);
    return PathExists(snap) ? backend_->ExclusiveBytes(snap) : 0;
  }

 private:
  Status RequireSnapshots() const {
    if (backend_->has_snapshots()) return Status::Ok();
    return Unavailable("snapshots need the btrfs pool (this pool is " + backend_->kind() + ")");
  }

  std::string StagingDir(const std::string& sandbox_id, const char* suffix) const {
    return sandboxes_dir_ + "/." + sandbox_id + suffix;
  }

  // Puts a whole root back at sandboxes/<id> for every rollback a crash interrupted. The
  // root path wins when present; otherwise the clone (.new) is complete, since it is only
  // ever moved away from the root path after being fully made; .old is the last resort.
  // .old is never made by this code (it swaps, see ReplaceRootFromSnapshot) but is handled
  // for the rename-aside order as well.
  Status RecoverRollbacks() {
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(sandboxes_dir_));
    std::set<std::string> ids;
    for (const auto& n : names) {
      if (n.empty() || n[0] != '.') continue;
      std::string id;
      for (const char* suffix : {kNewSuffix, kOldSuffix}) {
        size_t len = std::char_traits<char>::length(suffix);
        if (n.size() > len + 1 && n.compare(n.size() - len, len, suffix) == 0) id = n.substr(1, n.size() - len - 1);
      }
      if (id.empty() || !ValidateSandboxId(id).ok()) {
        LogWarn(kLog, "ignoring unknown entry sandboxes/" + n);
        continue;
      }
      ids.insert(id);
    }
    for (const auto& id : ids) {
      std::string root = sandboxes_dir_ + "/" + id;
      std::string fresh = StagingDir(id, kNewSuffix);
      std::string old = StagingDir(id, kOldSuffix);
      if (!PathExists(root)) {
        const std::string& back = PathExists(fresh) ? fresh : old;
        LogInfo(kLog, "interrupted rollback of " + id + ": moving " + back + " to the root path");
        if (::rename(back.c_str(), root.c_str()) != 0) return ErrnoStatus("rename", back + " -> " + root, errno);
      }
      LogInfo(kLog, "interrupted rollback of " + id + ": removing the staging trees");
      RETURN_IF_ERROR(backend_->DestroyRoot(fresh));
      RETURN_IF_ERROR(backend_->DestroyRoot(old));
    }
    return Status::Ok();
  }

  TemplateInfo WithPath(TemplateInfo info) const {
    info.path = templates_dir_ + "/" + kTemplatePrefix + info.digest.substr(7);
    return info;
  }

  // Builds into a scratch tree, pins it by digest and records `name` -> digest. Any failure
  // removes the scratch tree. Requires build_mu_.
  // The node's build jail, or this process when the pool was opened without one.
  ToolRunner Runner() const { return build_runner_ ? build_runner_ : ToolRunner(RunToolHere); }

  Result<TemplateInfo> BuildLocked(const std::string& name, const TreeBuilder& builder, const ProgressFn& progress) {
    std::string scratch = templates_dir_ + "/" + kScratchPrefix + RandomHex(8);
    RETURN_IF_ERROR(backend_->CreateScratch(scratch));
    int64_t start = MonoNowNs();
    Result<TemplateInfo> info = BuildInScratch(name, scratch, builder, progress);
    if (!info.ok()) {
      Status cleanup = backend_->RemoveTree(scratch);
      if (!cleanup.ok()) LogError(kLog, "cleanup of " + scratch + ": " + cleanup.ToString());
      return info.status().Annotate("build template " + name);
    }
    LogInfo(kLog, "template " + name + " = " + info->digest + " (" + std::to_string(info->size_bytes >> 20) +
                      " MiB) in " + std::to_string((MonoNowNs() - start) / 1000000) + " ms");
    return info;
  }

  Result<TemplateInfo> BuildInScratch(const std::string& name, const std::string& scratch,
                                      const TreeBuilder& builder, const ProgressFn& progress) {
    RETURN_IF_ERROR(builder(scratch, progress));
    if (progress) progress("computing digest");
    ASSIGN_OR_RETURN(TreeDigest d, digester_ ? digester_(scratch) : DigestTree(scratch));
    TemplateInfo info;
    info.name = name;
    info.digest = d.digest;
    info.size_bytes = d.size_bytes;
    info.created_at_ms = WallNowMs();
    info = WithPath(info);
    if (PathExists(info.path)) {
      // Same content as an existing template (e.g. rebuilt or imported twice): share it.
      RETURN_IF_ERROR(backend_->RemoveTree(scratch));
    } else {
      RETURN_IF_ERROR(backend_->Seal(scratch, info.path));
    }
    std::lock_guard<std::mutex> lock(index_mu_);
    ASSIGN_OR_RETURN(TemplateIndex index, LoadTemplateIndex(index_path_));
    RecordName(&index, info);
    RETURN_IF_ERROR(SaveTemplateIndex(index_path_, index));
    return info;
  }

  // Sets index[info.name] to `info`, keeping the name's previous digests for name@digest.
  static void RecordName(TemplateIndex* index, TemplateInfo info) {
    auto it = index->find(info.name);
    if (it != index->end()) {
      std::vector<std::string> earlier = it->second.earlier_digests;
      if (it->second.digest != info.digest) earlier.insert(earlier.begin(), it->second.digest);
      std::erase(earlier, info.digest);
      if (earlier.size() > kMaxEarlierDigests) earlier.resize(kMaxEarlierDigests);
      info.earlier_digests = std::move(earlier);
    }
    info.path.clear();
    (*index)[info.name] = std::move(info);
  }

  const std::string pool_dir_;
  PrivilegedActs* const privileged_;  // the broker; null: the pool acts itself
  const bool btrfs_quota_;
  const std::string templates_dir_;
  const std::string sandboxes_dir_;
  const std::string snapshots_dir_;
  const std::string volumes_dir_;
  const std::string index_path_;
  const std::string layers_path_;
  const std::unique_ptr<Backend> backend_;
  const ToolRunner build_runner_;
  const TreeDigester digester_;
  // PoolConfig.import_opener, or OpenImportSource inside PoolConfig.import_root.
  const std::function<Result<UniqueFd>(const std::string&)> import_opener_;
  std::mutex build_mu_;  // held for a whole template build
  std::mutex index_mu_;  // guards index.json read-modify-write
  std::mutex rollback_mu_;  // held for a whole ReplaceRootFromSnapshot
};

}  // namespace

Result<std::unique_ptr<Pool>> Pool::Open(const PoolConfig& config) {
  ASSIGN_OR_RETURN(PoolMount m, MountPool(config));
  return OpenMounted(config, m);
}

Result<std::unique_ptr<Pool>> Pool::OpenMounted(const PoolConfig& config, const PoolMount& m) {
  std::unique_ptr<Backend> backend =
      m.btrfs ? NewBtrfsBackend(m.quota_enabled, config.privileged) : NewOverlayBackend();
  auto pool = std::make_unique<PoolImpl>(m.pool_dir, std::move(backend), m.btrfs && m.quota_enabled,
                                         config.build_runner, config.digester, ImportOpenerOf(config), config.privileged);
  RETURN_IF_ERROR(pool->Recover());
  LogInfo(kLog, "pool " + m.pool_dir + " open, kind " + pool->kind() +
                    (m.btrfs ? (m.quota_enabled ? ", quotas on" : ", quotas OFF") : ", disk limits not enforced"));
  return std::unique_ptr<Pool>(std::move(pool));
}

}  // namespace space::storage
