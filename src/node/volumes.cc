#include "node/volumes.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/random.h"
#include "snapshot/gc.h"
#include "snapshot/write_behind_store.h"
#include "storage/names.h"

namespace space::node {
namespace {

constexpr const char* kLog = "volumes";
constexpr int kSyncUploads = 4;

uint64_t LimitBytes(const store::VolumeRecord& v) { return static_cast<uint64_t>(v.size_mb) << 20; }

// The pool names of a volume's read-only view for one sandbox and of its sync point.
std::string ViewName(const std::string& volume_id, const std::string& sandbox) { return volume_id + ".ro-" + sandbox; }
std::string SyncPointName(const std::string& volume_id) { return volume_id + ".sync"; }

bool Ended(store::SandboxState s) { return s == store::SandboxState::kDestroyed || s == store::SandboxState::kFailed; }

}  // namespace

Status ValidateVolumeName(const std::string& name) {
  bool ok =
      !name.empty() && name.size() <= 63 && ((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9'));
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-');
  if (!ok) return InvalidArgument("volume name '" + name.substr(0, 80) + "' must match [a-z0-9][a-z0-9._-]{0,62}");
  return Status::Ok();
}

Status ValidateVolumeRequests(const std::vector<VolumeRequest>& requests) {
  if (requests.size() > 8) return InvalidArgument("at most 8 volumes per sandbox");
  for (size_t i = 0; i < requests.size(); ++i) {
    const VolumeRequest& r = requests[i];
    RETURN_IF_ERROR(ValidateVolumeName(r.name));
    RETURN_IF_ERROR(runtime::ValidateVolumePath(r.path));
    for (size_t j = 0; j < i; ++j) {
      const VolumeRequest& o = requests[j];
      if (o.name == r.name) return InvalidArgument("volume " + r.name + " is named twice");
      const std::string& a = o.path.size() <= r.path.size() ? o.path : r.path;
      const std::string& b = o.path.size() <= r.path.size() ? r.path : o.path;
      if (b.compare(0, a.size(), a) == 0 && (b.size() == a.size() || b[a.size()] == '/')) {
        return InvalidArgument("volume paths " + a + " and " + b + " overlap");
      }
    }
  }
  return Status::Ok();
}

Result<std::vector<VolumeMountView>> Volumes::OfSandbox(const std::string& sandbox) {
  ASSIGN_OR_RETURN(auto mounts, d_.store->ListVolumeMounts("", sandbox));
  std::vector<VolumeMountView> out;
  for (const auto& m : mounts) {
    auto v = d_.store->GetVolumeById(m.volume);
    out.push_back({v.ok() ? v->name : m.volume, m.path, m.read_only});
  }
  return out;
}

std::shared_ptr<std::mutex> Volumes::LockFor(const std::string& volume_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& m = locks_[volume_id];
  if (!m) m = std::make_shared<std::mutex>();
  return m;
}

Result<store::VolumeRecord> Volumes::Create(const std::string& team, const std::string& name, int64_t size_mb) {
  RETURN_IF_ERROR(ValidateVolumeName(name));
  if (size_mb < 1 || size_mb > kMaxVolumeSizeMb) return InvalidArgument("size_mb must be 1..1048576");
  // Only the record: the bytes appear in a pool at the first mount, on the node that mounts it.
  store::VolumeRecord v{NewId("vol"), team, name, size_mb, WallNowMs(), "", "", ""};
  RETURN_IF_ERROR(d_.store->PutVolume(v));
  d_.audit->Record(team, "", "volumes", "create", {{"volume", name}, {"size_mb", size_mb}});
  return v;
}

Result<store::VolumeRecord> Volumes::Get(const std::string& team, const std::string& name) {
  RETURN_IF_ERROR(ValidateVolumeName(name));
  return d_.store->GetVolume(team, name);
}

Result<std::vector<store::VolumeRecord>> Volumes::List(const std::string& team) { return d_.store->ListVolumes(team); }

Result<bool> Volumes::SweepEndedMounts(const std::string& volume) {
  ASSIGN_OR_RETURN(auto mounts, d_.store->ListVolumeMounts(volume, ""));
  bool swept = false;
  for (const auto& m : mounts) {
    auto s = d_.store->GetSandbox(m.sandbox);
    if (s.ok() && !Ended(s->state)) continue;
    if (!s.ok() && s.status().code() != StatusCode::kNotFound) return s.status();
    RETURN_IF_ERROR(d_.store->DeleteVolumeMounts(m.sandbox));
    swept = true;
  }
  return swept;
}

Result<std::vector<store::VolumeMountRecord>> Volumes::Mounts(const store::VolumeRecord& v) {
  RETURN_IF_ERROR(SweepEndedMounts(v.id).status());
  return d_.store->ListVolumeMounts(v.id, "");
}

Status Volumes::Delete(const std::string& team, const std::string& name) {
  ASSIGN_OR_RETURN(store::VolumeRecord v, Get(team, name));
  auto lock = LockFor(v.id);
  std::lock_guard<std::mutex> hold(*lock);
  ASSIGN_OR_RETURN(auto mounts, Mounts(v));
  if (!mounts.empty()) {
    return Conflict("volume " + name + " is mounted by sandbox " + mounts[0].sandbox +
                    (mounts.size() > 1 ? " and " + std::to_string(mounts.size() - 1) + " more" : ""));
  }
  // The record first: from here no create can mount it (Attach checks it is still there).
  RETURN_IF_ERROR(d_.store->DeleteVolume(v.id));
  if (Status st = d_.pool->DestroyVolume(v.id); !st.ok()) LogWarn(kLog, st.ToString());
  if (!v.manifest.empty()) {
    if (Status st = DropManifest(v.manifest); !st.ok()) LogWarn(kLog, "drop " + v.manifest + ": " + st.ToString());
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    synced_.erase(v.id);
  }
  d_.audit->Record(team, "", "volumes", "delete", {{"volume", name}});
  return Status::Ok();
}

Result<store::VolumeRecord> Volumes::Fork(const std::string& team, const std::string& name,
                                          const std::string& new_name) {
  RETURN_IF_ERROR(ValidateVolumeName(new_name));
  ASSIGN_OR_RETURN(store::VolumeRecord src, Get(team, name));
  store::VolumeRecord dst{NewId("vol"), team, new_name, src.size_mb, WallNowMs(), d_.node_name, "", src.id};
  {
    auto lock = LockFor(src.id);
    std::lock_guard<std::mutex> hold(*lock);
    RETURN_IF_ERROR(EnsureLocal(&src, /*claim=*/false));
    RETURN_IF_ERROR(d_.store->PutVolume(dst));
    // A btrfs snapshot is atomic: a fork of a volume being written holds one instant of it.
    Status st = d_.pool->SnapshotVolume(src.id, dst.id, /*read_only=*/false, LimitBytes(dst));
    if (!st.ok()) {
      (void)d_.store->DeleteVolume(dst.id);
      return st.Annotate("fork volume " + name);
    }
  }
  d_.audit->Record(team, "", "volumes", "fork", {{"volume", name}, {"fork", new_name}});
  return dst;
}

Status Volumes::Attach(const std::string& team, const std::string& sandbox,
                       const std::vector<VolumeRequest>& requests) {
  if (requests.empty()) return Status::Ok();
  RETURN_IF_ERROR(ValidateVolumeRequests(requests));
  auto undo = [&] { (void)d_.store->DeleteVolumeMounts(sandbox); };
  for (const VolumeRequest& r : requests) {
    auto v = Get(team, r.name);
    if (!v.ok()) {
      undo();
      return v.status();
    }
    store::VolumeMountRecord m{v->id, sandbox, r.path, r.read_only, WallNowMs()};
    Status st = d_.store->PutVolumeMount(m);
    if (st.code() == StatusCode::kConflict && !r.read_only) {
      // A writer whose sandbox ended without releasing it (a lost node) does not hold it.
      auto swept = SweepEndedMounts(v->id);
      if (swept.ok() && *swept) st = d_.store->PutVolumeMount(m);
    }
    if (!st.ok()) {
      undo();
      if (st.code() == StatusCode::kConflict) {
        return Conflict("volume " + r.name +
                        " is mounted read-write by another sandbox (one writer at a time; "
                        "mount it read_only, or fork it)");
      }
      return st;
    }
    // Deleted meanwhile: Delete removes the record before anything else.
    if (auto again = d_.store->GetVolumeById(v->id); !again.ok()) {
      undo();
      return again.status().code() == StatusCode::kNotFound ? NotFound("volume " + r.name + " not found")
                                                            : again.status();
    }
  }
  return Status::Ok();
}

Status Volumes::EnsureLocal(store::VolumeRecord* v, bool claim) {
  ASSIGN_OR_RETURN(*v, d_.store->GetVolumeById(v->id));
  const bool have = d_.pool->HasVolume(v->id);
  if (v->node == d_.node_name) {
    if (!have) {
      // Recorded here but gone from the pool (a wiped pool): the store's copy, else empty.
      LogWarn(kLog, "volume " + v->name + " (" + v->id + ") was recorded on this node but is not in its pool");
      if (!v->manifest.empty()) {
        RETURN_IF_ERROR(Pull(*v));
      } else {
        RETURN_IF_ERROR(d_.pool->CreateVolume(v->id, LimitBytes(*v)));
      }
    }
    return Status::Ok();
  }
  if (!v->node.empty()) {
    return Conflict("volume " + v->name + "'s newest data is on node " + v->node +
                    " and not yet synced to the snapshot store; its sandbox there must stop first");
  }
  std::string local_manifest;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (auto it = synced_.find(v->id); it != synced_.end()) local_manifest = it->second;
  }
  if (!(have && local_manifest == v->manifest)) {
    RETURN_IF_ERROR(d_.pool->DestroyVolume(v->id));
    if (v->manifest.empty()) {
      RETURN_IF_ERROR(d_.pool->CreateVolume(v->id, LimitBytes(*v)));
    } else {
      RETURN_IF_ERROR(Pull(*v));
    }
    std::lock_guard<std::mutex> l(mu_);
    synced_[v->id] = v->manifest;
  }
  if (claim) {
    v->node = d_.node_name;
    RETURN_IF_ERROR(d_.store->UpdateVolume(*v));
    std::lock_guard<std::mutex> l(mu_);
    synced_.erase(v->id);  // about to change: no longer the store's copy
  }
  return Status::Ok();
}

Status Volumes::Pull(const store::VolumeRecord& v) {
  const int64_t t0 = MonoNowNs();
  {
    ASSIGN_OR_RETURN(BlobLocks::Hold lock, d_.locks->Shared());
    // The store is untrusted and the tree is a sandbox's: written in the tree jail.
    (void)d_.pool->DeleteSnapshot(v.manifest);
    RETURN_IF_ERROR(d_.pool
                        ->ImportSnapshot(v.manifest,
                                         [&](const std::string& dir) {
                                           return RestoreInTreeJail(d_.tree_jail, v.manifest, *d_.blobs, dir);
                                         })
                        .Annotate("pull volume " + v.name));
  }
  Status st = d_.pool->CreateVolumeFromSnapshot(v.id, v.manifest, LimitBytes(v));
  if (Status d = d_.pool->DeleteSnapshot(v.manifest); !d.ok()) LogWarn(kLog, d.ToString());
  if (!st.ok()) return st.Annotate("pull volume " + v.name);
  LogInfo(kLog, "pulled volume " + v.name + " (" + v.id + ", " + v.manifest + ") in " +
                    std::to_string((MonoNowNs() - t0) / 1'000'000) + " ms");
  return Status::Ok();
}

Result<std::vector<runtime::VolumeMountSpec>> Volumes::Prepare(const std::string& sandbox) {
  ASSIGN_OR_RETURN(auto mounts, d_.store->ListVolumeMounts("", sandbox));
  std::vector<runtime::VolumeMountSpec> out;
  for (const auto& m : mounts) {
    auto v = d_.store->GetVolumeById(m.volume);
    if (!v.ok()) return v.status().Annotate("volume mounted at " + m.path);
    auto lock = LockFor(v->id);
    std::lock_guard<std::mutex> hold(*lock);
    RETURN_IF_ERROR(EnsureLocal(&*v, /*claim=*/!m.read_only).Annotate("volume " + v->name));
    if (!m.read_only) {
      out.push_back({d_.pool->VolumePath(v->id), m.path, false});
      continue;
    }
    // A read-only subvolume of its own: btrfs refuses every write to it, whatever the sandbox
    // (which may mount and remount in its namespace) does to the mount's flags.
    const std::string view = ViewName(v->id, sandbox);
    RETURN_IF_ERROR(d_.pool->DestroyVolume(view));
    RETURN_IF_ERROR(d_.pool->SnapshotVolume(v->id, view, /*read_only=*/true, 0));
    out.push_back({d_.pool->VolumePath(view), m.path, true});
  }
  return out;
}

Status Volumes::Release(const std::string& sandbox, bool sync, bool forget) {
  ASSIGN_OR_RETURN(auto mounts, d_.store->ListVolumeMounts("", sandbox));
  Status first;
  for (const auto& m : mounts) {
    if (m.read_only) {
      Status st = d_.pool->DestroyVolume(ViewName(m.volume, sandbox));
      if (first.ok() && !st.ok()) first = st;
      continue;
    }
    if (!sync) continue;
    auto v = d_.store->GetVolumeById(m.volume);
    if (!v.ok() || v->node != d_.node_name) continue;
    auto lock = LockFor(v->id);
    std::lock_guard<std::mutex> hold(*lock);
    Status st = Sync(*v);
    if (!st.ok()) {
      // The newest copy stays here, recorded as this node's: nothing is lost, and the volume
      // mounts again on this node (on another only after a sync succeeds).
      LogError(kLog, "sync of volume " + v->name + " failed, its data stays on this node: " + st.ToString());
      if (first.ok()) first = st;
    }
  }
  if (forget) {
    Status st = d_.store->DeleteVolumeMounts(sandbox);
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

Status Volumes::Sync(store::VolumeRecord v) {
  const int64_t t0 = MonoNowNs();
  const std::string point = SyncPointName(v.id);
  RETURN_IF_ERROR(d_.pool->DestroyVolume(point));
  RETURN_IF_ERROR(d_.pool->SnapshotVolume(v.id, point, /*read_only=*/true, 0));
  const std::string manifest = NewId("snap");
  Result<snapshot::ExportStats> stats = InvalidArgument("not run");
  {
    ASSIGN_OR_RETURN(BlobLocks::Hold lock, d_.locks->Shared());
    // Incremental on the previous copy: unchanged files reuse its chunk lists unread.
    std::string parent = v.manifest;
    if (!parent.empty()) {
      auto there = d_.blobs->Exists(snapshot::ManifestKey(parent));
      if (!there.ok() || !*there) parent.clear();
    }
    snapshot::WriteBehindStore uploads(d_.blobs, kSyncUploads);
    stats = ExportInTreeJail(d_.tree_jail, d_.pool->VolumePath(point), manifest, parent, uploads);
  }
  if (Status d = d_.pool->DestroyVolume(point); !d.ok()) LogWarn(kLog, d.ToString());
  if (!stats.ok()) return stats.status().Annotate("sync volume " + v.name);
  const std::string old = v.manifest;
  v.manifest = manifest;
  v.node.clear();
  RETURN_IF_ERROR(d_.store->UpdateVolume(v));
  {
    std::lock_guard<std::mutex> l(mu_);
    synced_[v.id] = manifest;
  }
  if (!old.empty()) {
    if (Status st = DropManifest(old); !st.ok()) LogWarn(kLog, "drop " + old + ": " + st.ToString());
  }
  LogInfo(kLog, "synced volume " + v.name + " (" + v.id + ") as " + manifest + ": " +
                    std::to_string(stats->bytes_read) + " bytes read, " + std::to_string(stats->bytes_written) +
                    " stored in " + std::to_string((MonoNowNs() - t0) / 1'000'000) + " ms");
  return Status::Ok();
}

Status Volumes::DropManifest(const std::string& manifest) {
  ASSIGN_OR_RETURN(BlobLocks::Hold lock, d_.locks->Exclusive());
  RETURN_IF_ERROR(snapshot::DeleteManifest(*d_.blobs, manifest));
  // Under the exclusive lock no export is in flight: every temp object is a crash's leftover.
  snapshot::GcOptions options;
  options.temp_grace_ms = 0;
  return snapshot::CollectGarbage(*d_.blobs, options).status();
}

Status Volumes::Reconcile() {
  ASSIGN_OR_RETURN(auto names, d_.pool->ListVolumes());
  int cleaned = 0;
  for (const auto& n : names) {
    const size_t dot = n.find('.');
    // Views and sync points are made again when needed. A recorded volume's copy stays, even
    // a stale one: the next mount here pulls the newest over it (EnsureLocal).
    bool keep = dot == std::string::npos;
    if (keep) {
      auto v = d_.store->GetVolumeById(n);
      if (!v.ok() && v.status().code() != StatusCode::kNotFound) return v.status();
      keep = v.ok();
    }
    if (keep) continue;
    if (Status st = d_.pool->DestroyVolume(n); !st.ok()) LogWarn(kLog, st.ToString());
    ++cleaned;
  }
  ASSIGN_OR_RETURN(auto all, d_.store->ListVolumeMounts("", ""));
  std::set<std::string> seen;
  for (const auto& m : all) {
    if (!seen.insert(m.volume).second) continue;
    RETURN_IF_ERROR(SweepEndedMounts(m.volume).status());
  }
  if (cleaned > 0) LogInfo(kLog, "removed " + std::to_string(cleaned) + " leftover volume trees");
  return Status::Ok();
}

}  // namespace space::node
