// Pause, resume, snapshots, fork, rollback and diff on the ns runtime.
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/log.h"
#include "common/random.h"
#include "node/live.h"
#include "node/stored_credential.h"
#include "node/node.h"
#include "node/tree_jail.h"
#include "snapshot/store_lock.h"
#include "snapshot/gc.h"
#include "common/host_slots.h"
#include "storage/diff.h"

namespace space::node {
namespace {

constexpr int64_t kSnapshotWaitMs = 60000;
constexpr int kMaxForks = 16;
// The uid slot a tree jail prefers (any free one when taken): beside the build jail's
// (kMaxSlots-202, node.cc), clear of sandboxes', the gateway workers' and the API front's.
constexpr int64_t kTreeJailUidSlot = HostSlots::kMaxSlots - 203;

}  // namespace

Result<store::SandboxRecord> Node::InState(const std::string& team, const std::string& id,
                                           std::initializer_list<const char*> states, const std::string& action) {
  ASSIGN_OR_RETURN(store::SandboxRecord rec, Get(team, id));
  for (const char* s : states) {
    if (rec.state == s) return rec;
  }
  return Conflict("cannot " + action + " sandbox " + id + " while it is " + rec.state);
}

Status Node::SetState(const std::string& id, const std::string& state) {
  ASSIGN_OR_RETURN(store::SandboxRecord rec, store_->GetSandbox(id));
  rec.state = state;
  return store_->PutSandbox(rec);
}

Result<store::OperationRecord> Node::Pause(const std::string& team, const std::string& id) {
  RETURN_IF_ERROR(InState(team, id, {"running"}, "pause").status());
  Audit(team, id, "lifecycle", "pause", {});
  return ops_->Submit(team, "pause", id, [this, id]() -> Status {
    ASSIGN_OR_RETURN(store::SandboxRecord rec, store_->GetSandbox(id));
    if (rec.state != "running") return Conflict("sandbox " + id + " is " + rec.state + ", not running");
    RETURN_IF_ERROR(RuntimeOf(id)->Freeze(id));
    return SetState(id, "paused");
  });
}

Result<store::OperationRecord> Node::Resume(const std::string& team, const std::string& id) {
  ASSIGN_OR_RETURN(store::SandboxRecord rec, InState(team, id, {"paused", "suspended"}, "resume"));
  Audit(team, id, "lifecycle", "resume", {{"from", rec.state}});
  if (rec.state == "suspended") {
    return ops_->Submit(team, "resume", id, [this, id] { return RunResumeFromStore(id); });
  }
  return ops_->Submit(team, "resume", id, [this, id]() -> Status {
    ASSIGN_OR_RETURN(store::SandboxRecord rec, store_->GetSandbox(id));
    if (rec.state != "paused") return Conflict("sandbox " + id + " is " + rec.state + ", not paused");
    RETURN_IF_ERROR(RuntimeOf(id)->Thaw(id));
    return SetState(id, "running");
  });
}

Status Node::RunSnapshot(const std::string& id, store::SnapshotRecord* snap) {
  ASSIGN_OR_RETURN(store::SandboxRecord rec, store_->GetSandbox(id));
  if (rec.state != "running" && rec.state != "paused") {
    return Conflict("cannot snapshot sandbox " + id + " while it is " + rec.state);
  }
  snap->parent = rec.head_snapshot;
  if (rec.runtime == "vm") {
    // Memory, devices and disk: a running process goes on from where it was after restore.
    snap->kind = "full";
    RETURN_IF_ERROR(SnapshotVm(rec, snap->id));
  } else {
    // No syncfs first: btrfs flushes the subvolume's dirty data as part of the snapshot's own
    // commit. A pool-wide syncfs before freezing would shorten the frozen window for a sandbox
    // with much unwritten data, but it costs a second commit (~5 ms measured with
    // bench/lifecycle.py) on every snapshot.
    // Frozen processes write nothing, so the snapshot is consistent with one instant.
    bool freeze = rec.state == "running";
    if (freeze) RETURN_IF_ERROR(runtime_->Freeze(id));
    auto path = pool_->SnapshotRoot(id, snap->id);
    if (freeze) {
      if (Status st = runtime_->Thaw(id); !st.ok()) LogError("node", "thaw after snapshot: " + st.ToString());
    }
    RETURN_IF_ERROR(path.status());
  }
  snap->state = "local";
  snap->size_bytes = static_cast<int64_t>(pool_->SnapshotExclusiveBytes(snap->id));
  RETURN_IF_ERROR(store_->PutSnapshot(*snap));
  rec.head_snapshot = snap->id;
  return store_->PutSandbox(rec);
}

Result<store::SnapshotRecord> Node::Snapshot(const std::string& team, const std::string& id,
                                             const std::string& label) {
  RETURN_IF_ERROR(InState(team, id, {"running", "paused"}, "snapshot").status());
  auto snap = std::make_shared<store::SnapshotRecord>();
  snap->id = NewId("snap");
  snap->team = team;
  snap->sandbox = id;
  snap->label = label;
  snap->created_at_ms = WallNowMs();
  ASSIGN_OR_RETURN(store::OperationRecord op,
                   ops_->Submit(team, "snapshot", id, [this, id, snap] { return RunSnapshot(id, snap.get()); }));
  ASSIGN_OR_RETURN(store::OperationRecord done, ops_->Wait(op.id, kSnapshotWaitMs));
  if (done.state == "failed") return Internal("snapshot of " + id + " failed: " + done.error);
  if (done.state != "succeeded") return Unavailable("snapshot of " + id + " is still running: operation " + op.id);
  Audit(team, id, "lifecycle", "snapshot", {{"snapshot", snap->id}, {"label", label}});
  QueueExport(team, snap->id);
  return store_->GetSnapshot(snap->id);
}

Result<std::vector<store::SnapshotRecord>> Node::ListSnapshots(const std::string& team, const std::string& id) {
  RETURN_IF_ERROR(Get(team, id).status());
  ASSIGN_OR_RETURN(auto all, store_->ListSnapshots(id));
  std::vector<store::SnapshotRecord> out;
  for (auto& s : all) {
    if (s.state != "deleted") out.push_back(std::move(s));
  }
  return out;
}

Result<store::SnapshotRecord> Node::GetSnapshot(const std::string& team, const std::string& snap_id) {
  auto snap = store_->GetSnapshot(snap_id);
  if (!snap.ok() || snap->team != team || snap->state == "deleted") {
    return NotFound("snapshot " + snap_id + " not found");
  }
  return snap;
}

Status Node::DeleteSnapshot(const std::string& team, const std::string& snap_id) {
  ASSIGN_OR_RETURN(store::SnapshotRecord snap, GetSnapshot(team, snap_id));
  // Serialized with the sandbox's other operations, so a fork or rollback reading this
  // snapshot finishes first.
  ASSIGN_OR_RETURN(store::OperationRecord op,
                   ops_->Submit(team, "delete_snapshot", snap.sandbox, [this, snap]() mutable -> Status {
                     RETURN_IF_ERROR(pool_->DeleteSnapshot(snap.id));
                     snap.state = "deleted";
                     RETURN_IF_ERROR(store_->PutSnapshot(snap));
                     // Its objects go once no other manifest references them.
                     {
                       ASSIGN_OR_RETURN(snapshot::StoreLock lock, snapshot::StoreLock::Exclusive(blobs_dir_));
                       RETURN_IF_ERROR(snapshot::DeleteManifest(*blobs_, snap.id));
                     }
                     return RunGc();
                   }));
  ASSIGN_OR_RETURN(store::OperationRecord done, ops_->Wait(op.id, kSnapshotWaitMs));
  if (done.state != "succeeded") return Internal("delete snapshot " + snap_id + ": " + done.error);
  Audit(team, snap.sandbox, "lifecycle", "delete_snapshot", {{"snapshot", snap_id}});
  return Status::Ok();
}

Result<std::vector<std::pair<store::SandboxRecord, store::OperationRecord>>> Node::Fork(
    const std::string& team, const std::string& id, const std::string& snap_id, int count) {
  if (count < 1 || count > kMaxForks) {
    return InvalidArgument("count must be between 1 and " + std::to_string(kMaxForks));
  }
  ASSIGN_OR_RETURN(store::SandboxRecord parent, Get(team, id));
  std::string from = snap_id;
  if (from.empty()) {
    ASSIGN_OR_RETURN(store::SnapshotRecord now, Snapshot(team, id, "fork"));
    from = now.id;
  } else {
    RETURN_IF_ERROR(GetSnapshot(team, from).status());
  }
  CreateRequest req;
  req.team = team;
  req.template_name = parent.template_name;
  req.from_snapshot = from;
  req.timeout_s = parent.timeout_s;
  req.on_timeout = parent.on_timeout;
  auto resources = nlohmann::json::parse(parent.resources_json, nullptr, false);
  if (resources.is_object()) {
    req.cpus = resources.value("cpus", 1.0);
    req.memory_mb = resources.value("memory_mb", int64_t{512});
    req.disk_mb = resources.value("disk_mb", int64_t{2048});
  }
  auto env = nlohmann::json::parse(parent.env_json, nullptr, false);
  if (env.is_object()) {
    for (auto& [k, v] : env.items()) {
      if (v.is_string()) req.env[k] = v.get<std::string>();
    }
  }
  auto meta = nlohmann::json::parse(parent.metadata_json, nullptr, false);
  if (meta.is_object()) {
    for (auto& [k, v] : meta.items()) {
      if (v.is_string()) req.metadata[k] = v.get<std::string>();
    }
  }
  // A fork keeps its parent's egress policy and the credentials it may hold (with placeholders
  // of its own); one scoped to the parent alone does not follow, nor does its variable.
  req.inherited_egress_json = parent.egress_json;
  ASSIGN_OR_RETURN(auto parent_creds, store_->ListSandboxCredentials(id));
  for (const auto& c : parent_creds) {
    auto stored = store_->GetCredential(team, c.name);
    if (!stored.ok()) continue;
    ASSIGN_OR_RETURN(credentials::CredentialSpec spec, CredentialSpecFromStored(c.name, stored->spec_json));
    if (spec.scope.rfind("sandbox:", 0) == 0) {
      if (!spec.env.empty()) req.env.erase(spec.env);
      continue;
    }
    req.credentials.push_back(c.name);
  }
  std::vector<std::pair<store::SandboxRecord, store::OperationRecord>> out;
  for (int i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(auto created, Create(req));
    Audit(team, id, "lifecycle", "fork", {{"snapshot", from}, {"child", created.first.id}});
    out.push_back(std::move(created));
  }
  return out;
}

Status Node::RunRollback(const std::string& id, const std::string& snap_id) {
  ASSIGN_OR_RETURN(store::SandboxRecord rec, store_->GetSandbox(id));
  if (rec.state != "running" && rec.state != "paused") {
    return Conflict("cannot roll back sandbox " + id + " while it is " + rec.state);
  }
  auto resources = nlohmann::json::parse(rec.resources_json, nullptr, false);
  int64_t disk_mb = resources.is_object() ? resources.value("disk_mb", int64_t{2048}) : 2048;
  // Its processes end: the ns runtime keeps files, not memory.
  RETURN_IF_ERROR(EnsureLocalSnapshot(snap_id));
  TeardownLive(id);
  rec.uid_slot = -1;
  Status st = pool_->ReplaceRootFromSnapshot(id, snap_id, static_cast<uint64_t>(disk_mb) << 20);
  nlohmann::json steps = nlohmann::json::object();
  if (st.ok()) st = Boot(&rec, &steps);
  if (!st.ok()) {
    TeardownLive(id);
    rec.state = "failed";
    rec.error = "rollback to " + snap_id + " failed: " + st.message();
    (void)store_->PutSandbox(rec);
    return st;
  }
  rec.state = "running";
  rec.head_snapshot = snap_id;
  return store_->PutSandbox(rec);
}

Result<store::OperationRecord> Node::Rollback(const std::string& team, const std::string& id,
                                              const std::string& snap_id) {
  RETURN_IF_ERROR(InState(team, id, {"running", "paused"}, "roll back").status());
  RETURN_IF_ERROR(GetSnapshot(team, snap_id).status());
  Audit(team, id, "lifecycle", "rollback", {{"snapshot", snap_id}});
  return ops_->Submit(team, "rollback", id, [this, id, snap_id] { return RunRollback(id, snap_id); });
}

TreeJailConfig Node::TreeJail() {
  TreeJailConfig jail;
  jail.acquire_slot = [this] { return uid_slots_.Acquire(kTreeJailUidSlot); };
  jail.release_slot = [this](int64_t slot) { uid_slots_.Release(slot); };
  return jail;
}

Result<nlohmann::json> Node::Diff(const std::string& team, const std::string& a, const std::string& against) {
  RETURN_IF_ERROR(GetSnapshot(team, a).status());
  RETURN_IF_ERROR(GetSnapshot(team, against).status());
  RETURN_IF_ERROR(EnsureLocalSnapshot(a));
  RETURN_IF_ERROR(EnsureLocalSnapshot(against));
  // Snapshots hold files of the sandbox's users, which only the tree jail reads (node/tree_jail.h).
  ASSIGN_OR_RETURN(storage::TreeDiff d, DiffInTreeJail(TreeJail(), pool_->SnapshotPath(against), pool_->SnapshotPath(a)));
  return nlohmann::json{{"snapshot", a},
                        {"against", against},
                        {"added", d.added},
                        {"changed", d.changed},
                        {"removed", d.removed},
                        {"truncated", d.truncated}};
}

}  // namespace space::node
