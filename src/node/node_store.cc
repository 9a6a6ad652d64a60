// The snapshot store side of the lifecycle: exporting snapshots, restoring them on demand,
// garbage collection, suspend/resume and rolling snapshots.
#include <set>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/log.h"
#include "common/random.h"
#include "node/live.h"
#include "node/node.h"
#include "snapshot/store_lock.h"
#include "snapshot/exporter.h"
#include "snapshot/gc.h"
#include "snapshot/restorer.h"

namespace space::node {
namespace {

constexpr int64_t kExportWaitMs = 600000;
constexpr char kRollingLabel[] = "rolling";

}  // namespace

void Node::QueueExport(const std::string& team, const std::string& snap_id) {
  auto op = ops_->Submit(team, "export", snap_id, [this, snap_id] { return RunExport(snap_id); });
  if (!op.ok()) LogError("node", "queue export of " + snap_id + ": " + op.status().ToString());
}

Status Node::RunExport(const std::string& snap_id) {
  ASSIGN_OR_RETURN(store::SnapshotRecord snap, store_->GetSnapshot(snap_id));
  if (snap.state == "restorable" || snap.state == "deleted") return Status::Ok();
  // Incremental against the nearest ancestor whose manifest is in the store.
  std::string parent = snap.parent;
  while (!parent.empty()) {
    auto p = store_->GetSnapshot(parent);
    if (!p.ok()) {
      parent.clear();
      break;
    }
    if (p->state == "restorable") break;
    parent = p->parent;
  }
  snap.state = "exporting";
  RETURN_IF_ERROR(store_->PutSnapshot(snap));
  Result<snapshot::ExportStats> stats = InvalidArgument("not run");
  {
    ASSIGN_OR_RETURN(snapshot::StoreLock lock, snapshot::StoreLock::Shared(blobs_dir_));
    // The snapshot holds files of the sandbox's users: read in the tree jail, written here.
    stats = ExportInTreeJail(TreeJail(), pool_->SnapshotPath(snap_id), snap_id, parent, *blobs_);
  }
  // Deleted while it was exporting: the manifest that just landed must go as well.
  ASSIGN_OR_RETURN(snap, store_->GetSnapshot(snap_id));
  if (snap.state == "deleted") {
    if (stats.ok()) {
      ASSIGN_OR_RETURN(snapshot::StoreLock lock, snapshot::StoreLock::Exclusive(blobs_dir_));
      RETURN_IF_ERROR(snapshot::DeleteManifest(*blobs_, snap_id));
    }
    return RunGc();
  }
  if (!stats.ok()) {
    snap.state = "failed";
    snap.error = stats.status().message();
    RETURN_IF_ERROR(store_->PutSnapshot(snap));
    return stats.status();
  }
  snap.state = "restorable";
  snap.size_bytes = static_cast<int64_t>(stats->bytes_written);
  LogInfo("store", "exported " + snap_id + ": " + std::to_string(stats->bytes_read) + " bytes read, " +
                       std::to_string(stats->bytes_written) + " stored in " + std::to_string(stats->duration_ms) +
                       " ms" + (parent.empty() ? "" : " (incremental on " + parent + ")"));
  return store_->PutSnapshot(snap);
}

Status Node::RunGc() {
  ASSIGN_OR_RETURN(snapshot::StoreLock lock, snapshot::StoreLock::Exclusive(blobs_dir_));
  // Every export holds the store lock shared for its whole run, so under the exclusive lock no
  // temp file can belong to a live writer: they are all leftovers of a crash.
  snapshot::GcOptions options;
  options.temp_grace_ms = 0;
  ASSIGN_OR_RETURN(snapshot::GcStats stats, snapshot::CollectGarbage(*blobs_, options));
  (void)stats;
  return Status::Ok();
}

Status Node::EnsureLocalSnapshot(const std::string& snap_id) {
  ASSIGN_OR_RETURN(std::vector<std::string> local, pool_->ListSnapshots());
  for (const auto& s : local) {
    if (s == snap_id) return Status::Ok();
  }
  ASSIGN_OR_RETURN(store::SnapshotRecord snap, store_->GetSnapshot(snap_id));
  if (snap.state != "restorable") {
    return Conflict("snapshot " + snap_id + " is not on this node and not restorable from the store (state " +
                    snap.state + ")");
  }
  ASSIGN_OR_RETURN(snapshot::StoreLock lock, snapshot::StoreLock::Shared(blobs_dir_));
  // The store is untrusted and the tree will be the sandbox's: written in the tree jail.
  return pool_->ImportSnapshot(snap_id,
                               [&](const std::string& dir) { return RestoreInTreeJail(TreeJail(), snap_id, *blobs_, dir); });
}

Result<store::OperationRecord> Node::Suspend(const std::string& team, const std::string& id) {
  RETURN_IF_ERROR(InState(team, id, {"running", "paused"}, "suspend").status());
  Audit(team, id, "lifecycle", "suspend", {});
  return ops_->Submit(team, "suspend", id, [this, id] { return RunSuspend(id); });
}

Status Node::RunSuspend(const std::string& id) {
  ASSIGN_OR_RETURN(store::SandboxRecord rec, store_->GetSandbox(id));
  if (rec.state != "running" && rec.state != "paused") {
    return Conflict("cannot suspend sandbox " + id + " while it is " + rec.state);
  }
  const std::string before = rec.state;
  store::SnapshotRecord snap;
  snap.id = NewId("snap");
  snap.team = rec.team;
  snap.sandbox = id;
  snap.label = "suspend";
  snap.created_at_ms = WallNowMs();
  // Frozen from the snapshot on, so nothing written after it is lost when it stops. Marked
  // paused first so RunSnapshot neither freezes nor thaws it.
  runtime::Runtime* rt = RuntimeOf(id);
  RETURN_IF_ERROR(rt->Freeze(id));
  Status st = SetState(id, "paused");
  if (st.ok()) st = RunSnapshot(id, &snap);
  if (st.ok()) st = SetState(id, "suspending");
  if (st.ok()) st = RunExport(snap.id);
  if (!st.ok()) {
    // Not suspended: it goes on where it was, nothing lost.
    if (before == "running") (void)rt->Thaw(id);
    (void)SetState(id, before);
    return st.Annotate("suspend " + id);
  }
  TeardownLive(id);
  RETURN_IF_ERROR(pool_->DestroyRoot(id));
  // The local copy goes too: the store is now the only home of the sandbox's files, which is
  // what lets it resume on any node reading the same store.
  RETURN_IF_ERROR(pool_->DeleteSnapshot(snap.id));
  ASSIGN_OR_RETURN(rec, store_->GetSandbox(id));
  rec.state = "suspended";
  rec.uid_slot = -1;
  rec.head_snapshot = snap.id;
  return store_->PutSandbox(rec);
}

Status Node::RunResumeFromStore(const std::string& id) {
  // A suspended sandbox lives in the snapshot store, not on a node: in a fleet any node may
  // resume it, so the move to `resuming` is a compare-and-set that names this node, and of
  // two nodes asked at once exactly one wins.
  ASSIGN_OR_RETURN(bool claimed, store_->ClaimSandbox(id, "suspended", "resuming", config_.node_name));
  ASSIGN_OR_RETURN(store::SandboxRecord rec, store_->GetSandbox(id));
  if (!claimed) return Conflict("sandbox " + id + " is " + rec.state + ", not suspended");
  auto resources = nlohmann::json::parse(rec.resources_json, nullptr, false);
  int64_t disk_mb = resources.is_object() ? resources.value("disk_mb", int64_t{2048}) : 2048;
  nlohmann::json steps = nlohmann::json::object();
  Status st = EnsureLocalSnapshot(rec.head_snapshot);
  if (st.ok()) st = pool_->CreateRootFromSnapshot(id, rec.head_snapshot, static_cast<uint64_t>(disk_mb) << 20).status();
  if (st.ok()) st = Boot(&rec, &steps);
  if (!st.ok()) {
    TeardownLive(id);
    (void)pool_->DestroyRoot(id);
    (void)SetState(id, "suspended");  // still resumable: the store holds it
    return st.Annotate("resume " + id);
  }
  rec.state = "running";
  rec.expires_at_ms = WallNowMs() + rec.timeout_s * 1000;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = live_.find(id); it != live_.end()) it->second->expires_at_ms = rec.expires_at_ms;
  }
  return store_->PutSandbox(rec);
}

Status Node::ReconcileSnapshots() {
  // An export interrupted by the crash wrote no manifest (it goes last), so that snapshot is
  // not restorable; its orphaned objects are collected and the export runs again.
  ASSIGN_OR_RETURN(auto snaps, store_->ListSnapshots(""));
  // In a fleet the store holds every node's snapshots: only those whose files are in this
  // node's pool are this node's to export.
  ASSIGN_OR_RETURN(auto local_ids, pool_->ListSnapshots());
  std::set<std::string> local(local_ids.begin(), local_ids.end());
  bool gc = false;
  for (auto& s : snaps) {
    if (s.state != "exporting" && s.state != "local") continue;
    if (!local.count(s.id)) continue;
    auto manifest = blobs_->Exists(snapshot::ManifestKey(s.id));
    if (manifest.ok() && *manifest) {
      s.state = "restorable";  // the crash came after the manifest landed
      RETURN_IF_ERROR(store_->PutSnapshot(s));
      continue;
    }
    gc = gc || s.state == "exporting";
    s.state = "local";
    RETURN_IF_ERROR(store_->PutSnapshot(s));
    QueueExport(s.team, s.id);
  }
  if (gc) return RunGc();
  return Status::Ok();
}

void Node::RollSnapshots(int64_t now_ms) {
  std::vector<std::shared_ptr<Live>> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, l] : live_) live.push_back(l);
  }
  for (auto& l : live) {
    // Checked from the cached interval first: this runs every tick for every sandbox.
    if (l->rolling_every_ms <= 0 || now_ms - l->last_rolling_ms.load() < l->rolling_every_ms) continue;
    l->last_rolling_ms = now_ms;
    auto rec = store_->GetSandbox(l->id);
    if (!rec.ok() || rec->state != "running") continue;
    auto policy = nlohmann::json::parse(rec->policy_json, nullptr, false);
    if (!policy.is_object()) continue;
    std::string team = rec->team, id = rec->id;
    int64_t keep = policy.value("keep", int64_t{24});
    int64_t max_age_ms = policy.value("max_age_s", int64_t{7 * 86400}) * 1000;
    auto op = ops_->Submit(team, "rolling_snapshot", id, [this, team, id, keep, max_age_ms]() -> Status {
      store::SnapshotRecord snap;
      snap.id = NewId("snap");
      snap.team = team;
      snap.sandbox = id;
      snap.label = kRollingLabel;
      snap.created_at_ms = WallNowMs();
      RETURN_IF_ERROR(RunSnapshot(id, &snap));
      QueueExport(team, snap.id);
      // Thin: keep the newest `keep` rolling snapshots that are younger than the max age.
      ASSIGN_OR_RETURN(auto all, store_->ListSnapshots(id));
      std::vector<store::SnapshotRecord> rolling;
      for (auto& s : all) {
        if (s.label == kRollingLabel && s.state != "deleted") rolling.push_back(s);
      }
      int64_t now = WallNowMs();
      bool deleted = false;
      for (size_t i = 0; i < rolling.size(); ++i) {
        bool too_many = static_cast<int64_t>(rolling.size() - i) > keep;
        bool too_old = now - rolling[i].created_at_ms > max_age_ms;
        if (!too_many && !too_old) continue;
        RETURN_IF_ERROR(pool_->DeleteSnapshot(rolling[i].id));
        rolling[i].state = "deleted";
        RETURN_IF_ERROR(store_->PutSnapshot(rolling[i]));
        {
          ASSIGN_OR_RETURN(snapshot::StoreLock lock, snapshot::StoreLock::Exclusive(blobs_dir_));
          RETURN_IF_ERROR(snapshot::DeleteManifest(*blobs_, rolling[i].id));
        }
        deleted = true;
      }
      if (deleted) return RunGc();
      return Status::Ok();
    });
    if (!op.ok()) LogError("node", "rolling snapshot of " + id + ": " + op.status().ToString());
  }
}

}  // namespace space::node
