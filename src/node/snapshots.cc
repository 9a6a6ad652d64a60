#include "node/snapshots.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <set>

#include "common/clock.h"
#include "common/log.h"
#include "common/random.h"
#include "node/owned_sandbox.h"
#include "runtime/vm/vm_runtime.h"
#include "snapshot/exporter.h"
#include "snapshot/gc.h"
#include "snapshot/restorer.h"
#include "snapshot/write_behind_store.h"
#include "store/quotas.h"

namespace space::node {
namespace {

constexpr int64_t kSnapshotWaitMs = 60000;
constexpr char kRollingLabel[] = "rolling";
using store::SandboxState;
using store::SnapshotState;

}  // namespace

Status Snapshots::TakeNow(const std::string& id, store::SnapshotRecord* snap) {
  ASSIGN_OR_RETURN(store::Sandbox rec, d_.store->GetSandbox(id));
  if (rec.state != SandboxState::kRunning && rec.state != SandboxState::kPaused) {
    return Conflict("cannot snapshot sandbox " + id + " while it is " + std::string(store::StateName(rec.state)));
  }
  snap->parent = rec.head_snapshot;
  if (rec.runtime == store::RuntimeKind::kVm) {
    // Memory, devices and disk: a running process goes on from where it was after restore.
    snap->kind = "full";
    RETURN_IF_ERROR(CheckpointVm(rec, snap->id));
  } else {
    // No syncfs first: btrfs flushes the subvolume's dirty data as part of the snapshot's own
    // commit. A pool-wide syncfs before freezing would shorten the frozen window for a sandbox
    // with much unwritten data, but it costs a second commit (~5 ms measured with
    // bench/lifecycle.py) on every snapshot.
    // Frozen processes write nothing, so the snapshot is consistent with one instant.
    runtime::Runtime* rt = d_.runtimes->ns();
    const bool freeze = rec.state == SandboxState::kRunning;
    if (freeze) RETURN_IF_ERROR(rt->Freeze(id));
    auto path = d_.pool->SnapshotRoot(id, snap->id);
    if (freeze) {
      if (Status st = rt->Thaw(id); !st.ok()) LogError("node", "thaw after snapshot: " + st.ToString());
    }
    RETURN_IF_ERROR(path.status());
  }
  snap->state = SnapshotState::kLocal;
  snap->size_bytes = static_cast<int64_t>(d_.pool->SnapshotExclusiveBytes(snap->id));
  RETURN_IF_ERROR(d_.store->PutSnapshot(*snap));
  rec.head_snapshot = snap->id;
  return d_.store->PutSandbox(rec);
}

Status Snapshots::CheckpointVm(const store::Sandbox& rec, const std::string& snap_id) {
  runtime::Runtime* rt = d_.runtimes->For(rec.runtime);
  if (!rt->full_checkpoints()) return Internal("sandbox " + rec.id + " is not on a runtime with full checkpoints");
  // The state goes beside the disk image in the sandbox's root, so the pool's O(1) snapshot
  // (a btrfs subvolume snapshot: shared blocks) takes both at one instant.
  const std::string state = d_.pool->RootPath(rec.id) + "/" + runtime::kVmStateDir + "/" + runtime::kVmMemoryName;
  const int64_t t0 = MonoNowNs();
  Status st = rt->Checkpoint(rec.id, state);
  const int64_t t1 = MonoNowNs();
  Result<std::string> path = st.ok() ? d_.pool->SnapshotRoot(rec.id, snap_id) : Result<std::string>(st);
  struct stat sb {};
  bool have_state = false;
  // Through the state dir's fd (no symlinks beneath the root): the root's contents are not
  // trusted.
  if (auto sd = runtime::OpenVmStateDir(d_.pool->RootPath(rec.id), false); sd.ok()) {
    have_state = ::fstatat(sd->get(), runtime::kVmMemoryName, &sb, AT_SYMLINK_NOFOLLOW) == 0;
    ::unlinkat(sd->get(), runtime::kVmMemoryName, 0);
  }
  // The VMM is stopped since the checkpoint; a running sandbox goes on, a paused one stays.
  if (rec.state == SandboxState::kRunning) {
    if (Status c = rt->Thaw(rec.id); !c.ok())
      LogError("vm", "continue after checkpoint of " + rec.id + ": " + c.ToString());
  }
  RETURN_IF_ERROR(path.status());
  LogInfo("vm", "checkpoint " + snap_id + " of " + rec.id + ": memory state " +
                    std::to_string(have_state ? sb.st_size : 0) + " bytes in " + std::to_string((t1 - t0) / 1000000) +
                    " ms, disk snapshot in " + std::to_string((MonoNowNs() - t1) / 1000000) + " ms");
  return Status::Ok();
}

Result<store::SnapshotRecord> Snapshots::Take(const std::string& team, const std::string& id,
                                              const std::string& label) {
  RETURN_IF_ERROR(
      GetOwnedInState(d_.store, team, id, {SandboxState::kRunning, SandboxState::kPaused}, "snapshot").status());
  RETURN_IF_ERROR(store::AdmitSnapshot(d_.store, team));
  auto snap = std::make_shared<store::SnapshotRecord>();
  snap->id = NewId("snap");
  snap->team = team;
  snap->sandbox = id;
  snap->label = label;
  snap->created_at_ms = WallNowMs();
  ASSIGN_OR_RETURN(store::OperationRecord op,
                   d_.ops->Submit(team, "snapshot", id, [this, id, snap] { return TakeNow(id, snap.get()); }));
  ASSIGN_OR_RETURN(store::OperationRecord done, d_.ops->Wait(op.id, kSnapshotWaitMs));
  if (done.state == store::OperationState::kFailed) return Internal("snapshot of " + id + " failed: " + done.error);
  if (done.state != store::OperationState::kSucceeded) {
    return Unavailable("snapshot of " + id + " is still running: operation " + op.id);
  }
  d_.audit->Record(team, id, "lifecycle", "snapshot", {{"snapshot", snap->id}, {"label", label}});
  QueueExport(team, snap->id);
  return d_.store->GetSnapshot(snap->id);
}

Result<std::vector<store::SnapshotRecord>> Snapshots::List(const std::string& team, const std::string& id) {
  RETURN_IF_ERROR(GetOwned(d_.store, team, id).status());
  ASSIGN_OR_RETURN(auto all, d_.store->ListSnapshots(id));
  std::vector<store::SnapshotRecord> out;
  for (auto& s : all) {
    if (s.state != SnapshotState::kDeleted) out.push_back(std::move(s));
  }
  return out;
}

Result<store::SnapshotRecord> Snapshots::Get(const std::string& team, const std::string& snap_id) {
  auto snap = d_.store->GetSnapshot(snap_id);
  if (!snap.ok() || snap->team != team || snap->state == SnapshotState::kDeleted) {
    return NotFound("snapshot " + snap_id + " not found");
  }
  return snap;
}

Status Snapshots::Delete(const std::string& team, const std::string& snap_id) {
  ASSIGN_OR_RETURN(store::SnapshotRecord snap, Get(team, snap_id));
  // Serialized with the sandbox's other operations, so a fork or rollback reading this
  // snapshot finishes first.
  ASSIGN_OR_RETURN(store::OperationRecord op,
                   d_.ops->Submit(team, "delete_snapshot", snap.sandbox, [this, snap]() mutable -> Status {
                     RETURN_IF_ERROR(d_.pool->DeleteSnapshot(snap.id));
                     snap.state = SnapshotState::kDeleted;
                     RETURN_IF_ERROR(d_.store->PutSnapshot(snap));
                     // Its objects go once no other manifest references them.
                     {
                       ASSIGN_OR_RETURN(BlobLocks::Hold lock, d_.locks->Exclusive());
                       RETURN_IF_ERROR(snapshot::DeleteManifest(*d_.blobs, snap.id));
                     }
                     return CollectGarbage();
                   }));
  ASSIGN_OR_RETURN(store::OperationRecord done, d_.ops->Wait(op.id, kSnapshotWaitMs));
  if (done.state != store::OperationState::kSucceeded)
    return Internal("delete snapshot " + snap_id + ": " + done.error);
  d_.audit->Record(team, snap.sandbox, "lifecycle", "delete_snapshot", {{"snapshot", snap_id}});
  return Status::Ok();
}

Result<storage::TreeDiff> Snapshots::Diff(const std::string& team, const std::string& a, const std::string& against) {
  RETURN_IF_ERROR(Get(team, a).status());
  RETURN_IF_ERROR(Get(team, against).status());
  RETURN_IF_ERROR(EnsureLocal(a));
  RETURN_IF_ERROR(EnsureLocal(against));
  return DiffInTreeJail(d_.tree_jail, d_.pool->SnapshotPath(against), d_.pool->SnapshotPath(a));
}

void Snapshots::QueueExport(const std::string& team, const std::string& snap_id) {
  auto op = d_.ops->Submit(team, "export", snap_id, [this, snap_id] { return Export(snap_id); });
  if (!op.ok()) LogError("node", "queue export of " + snap_id + ": " + op.status().ToString());
}

Status Snapshots::Export(const std::string& snap_id) {
  ASSIGN_OR_RETURN(store::SnapshotRecord snap, d_.store->GetSnapshot(snap_id));
  if (snap.state == SnapshotState::kRestorable || snap.state == SnapshotState::kDeleted) return Status::Ok();
  // Incremental against the nearest ancestor whose manifest is in the store.
  std::string parent = snap.parent;
  while (!parent.empty()) {
    auto p = d_.store->GetSnapshot(parent);
    if (!p.ok()) {
      parent.clear();
      break;
    }
    if (p->state == SnapshotState::kRestorable) break;
    parent = p->parent;
  }
  snap.state = SnapshotState::kExporting;
  RETURN_IF_ERROR(d_.store->PutSnapshot(snap));
  Result<snapshot::ExportStats> stats = InvalidArgument("not run");
  {
    ASSIGN_OR_RETURN(BlobLocks::Hold lock, d_.locks->Shared());
    // The snapshot holds files of the sandbox's users: read in the tree jail, written here.
    // Chunk uploads overlap; the manifest still lands only after every one of them.
    snapshot::WriteBehindStore uploads(d_.blobs, kExportUploads);
    stats = ExportInTreeJail(d_.tree_jail, d_.pool->SnapshotPath(snap_id), snap_id, parent, uploads);
  }
  // Deleted while it was exporting: the manifest that just landed must go as well.
  ASSIGN_OR_RETURN(snap, d_.store->GetSnapshot(snap_id));
  if (snap.state == SnapshotState::kDeleted) {
    if (stats.ok()) {
      ASSIGN_OR_RETURN(BlobLocks::Hold lock, d_.locks->Exclusive());
      RETURN_IF_ERROR(snapshot::DeleteManifest(*d_.blobs, snap_id));
    }
    return CollectGarbage();
  }
  if (!stats.ok()) {
    snap.state = SnapshotState::kFailed;
    snap.error = stats.status().message();
    RETURN_IF_ERROR(d_.store->PutSnapshot(snap));
    return stats.status();
  }
  snap.state = SnapshotState::kRestorable;
  snap.size_bytes = static_cast<int64_t>(stats->bytes_written);
  LogInfo("store", "exported " + snap_id + ": " + std::to_string(stats->bytes_read) + " bytes read, " +
                       std::to_string(stats->bytes_written) + " stored in " + std::to_string(stats->duration_ms) +
                       " ms" + (parent.empty() ? "" : " (incremental on " + parent + ")"));
  return d_.store->PutSnapshot(snap);
}

Status Snapshots::CollectGarbage() {
  ASSIGN_OR_RETURN(BlobLocks::Hold lock, d_.locks->Exclusive());
  // Every export holds the store lock shared for its whole run, so under the exclusive lock no
  // temp file can belong to a live writer: they are all leftovers of a crash.
  snapshot::GcOptions options;
  options.temp_grace_ms = 0;
  return snapshot::CollectGarbage(*d_.blobs, options).status();
}

Status Snapshots::EnsureLocal(const std::string& snap_id) {
  ASSIGN_OR_RETURN(std::vector<std::string> local, d_.pool->ListSnapshots());
  for (const auto& s : local) {
    if (s == snap_id) return Status::Ok();
  }
  ASSIGN_OR_RETURN(store::SnapshotRecord snap, d_.store->GetSnapshot(snap_id));
  if (snap.state != SnapshotState::kRestorable) {
    return Conflict("snapshot " + snap_id + " is not on this node and not restorable from the store (state " +
                    std::string(store::SnapshotStateName(snap.state)) + ")");
  }
  ASSIGN_OR_RETURN(BlobLocks::Hold lock, d_.locks->Shared());
  // The store is untrusted and the tree will be the sandbox's: written in the tree jail.
  return d_.pool->ImportSnapshot(
      snap_id, [&](const std::string& dir) { return RestoreInTreeJail(d_.tree_jail, snap_id, *d_.blobs, dir); });
}

Status Snapshots::Reconcile() {
  // An export interrupted by the crash wrote no manifest (it goes last), so that snapshot is
  // not restorable; its orphaned objects are collected and the export runs again.
  ASSIGN_OR_RETURN(auto snaps, d_.store->ListSnapshots(""));
  // In a fleet the store holds every node's snapshots: only those whose files are in this
  // node's pool are this node's to export.
  ASSIGN_OR_RETURN(auto local_ids, d_.pool->ListSnapshots());
  std::set<std::string> local(local_ids.begin(), local_ids.end());
  bool gc = false;
  for (auto& s : snaps) {
    if (s.state != SnapshotState::kExporting && s.state != SnapshotState::kLocal) continue;
    if (!local.count(s.id)) continue;
    auto manifest = d_.blobs->Exists(snapshot::ManifestKey(s.id));
    if (manifest.ok() && *manifest) {
      s.state = SnapshotState::kRestorable;  // the crash came after the manifest landed
      RETURN_IF_ERROR(d_.store->PutSnapshot(s));
      continue;
    }
    gc = gc || s.state == SnapshotState::kExporting;
    s.state = SnapshotState::kLocal;
    RETURN_IF_ERROR(d_.store->PutSnapshot(s));
    QueueExport(s.team, s.id);
  }
  if (gc) return CollectGarbage();
  return Status::Ok();
}

void Snapshots::Roll(int64_t now_ms, const std::vector<std::shared_ptr<LiveSandbox>>& live) {
  for (const auto& l : live) {
    // Checked from the cached interval first: this runs every tick for every sandbox.
    if (l->rolling_every_ms <= 0 || now_ms - l->last_rolling_ms.load() < l->rolling_every_ms) continue;
    l->last_rolling_ms = now_ms;
    auto rec = d_.store->GetSandbox(l->id);
    if (!rec.ok() || rec->state != SandboxState::kRunning || !rec->policy.enabled()) continue;
    const std::string team = rec->team, id = rec->id;
    const int64_t keep = rec->policy.keep;
    const int64_t max_age_ms = rec->policy.max_age_s * 1000;
    auto op = d_.ops->Submit(team, "rolling_snapshot", id, [this, team, id, keep, max_age_ms]() -> Status {
      store::SnapshotRecord snap;
      snap.id = NewId("snap");
      snap.team = team;
      snap.sandbox = id;
      snap.label = kRollingLabel;
      snap.created_at_ms = WallNowMs();
      RETURN_IF_ERROR(TakeNow(id, &snap));
      QueueExport(team, snap.id);
      // Thin: keep the newest `keep` rolling snapshots that are younger than the max age.
      ASSIGN_OR_RETURN(auto all, d_.store->ListSnapshots(id));
      std::vector<store::SnapshotRecord> rolling;
      for (auto& s : all) {
        if (s.label == kRollingLabel && s.state != SnapshotState::kDeleted) rolling.push_back(s);
      }
      const int64_t now = WallNowMs();
      bool deleted = false;
      for (size_t i = 0; i < rolling.size(); ++i) {
        const bool too_many = static_cast<int64_t>(rolling.size() - i) > keep;
        const bool too_old = now - rolling[i].created_at_ms > max_age_ms;
        if (!too_many && !too_old) continue;
        RETURN_IF_ERROR(d_.pool->DeleteSnapshot(rolling[i].id));
        rolling[i].state = SnapshotState::kDeleted;
        RETURN_IF_ERROR(d_.store->PutSnapshot(rolling[i]));
        {
          ASSIGN_OR_RETURN(BlobLocks::Hold lock, d_.locks->Exclusive());
          RETURN_IF_ERROR(snapshot::DeleteManifest(*d_.blobs, rolling[i].id));
        }
        deleted = true;
      }
      if (deleted) return CollectGarbage();
      return Status::Ok();
    });
    if (!op.ok()) LogError("node", "rolling snapshot of " + id + ": " + op.status().ToString());
  }
}

}  // namespace space::node
