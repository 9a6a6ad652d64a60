// Lifecycle: pause and resume, suspend to the snapshot store and resume from it, fork and
// rollback.
#include "common/clock.h"
#include "common/log.h"
#include "common/random.h"
#include "node/lifecycle.h"
#include "node/owned_sandbox.h"
#include "node/runtimes.h"
#include "store/quotas.h"

namespace space::node {
namespace {

using store::SandboxState;

constexpr int kMaxForks = 16;

}  // namespace

Result<store::OperationRecord> Lifecycle::Pause(const std::string& team, const std::string& id) {
  RETURN_IF_ERROR(GetOwnedInState(d_.store, team, id, {SandboxState::kRunning}, "pause").status());
  d_.audit->Record(team, id, "lifecycle", "pause");
  return d_.ops->Submit(team, "pause", id, [this, id]() -> Status {
    ASSIGN_OR_RETURN(store::Sandbox rec, d_.store->GetSandbox(id));
    if (rec.state != SandboxState::kRunning) {
      return Conflict("sandbox " + id + " is " + std::string(store::StateName(rec.state)) + ", not running");
    }
    RETURN_IF_ERROR(RuntimeOf(id)->Freeze(id));
    return SetState(id, SandboxState::kPaused);
  });
}

Result<store::OperationRecord> Lifecycle::Resume(const std::string& team, const std::string& id) {
  ASSIGN_OR_RETURN(store::Sandbox rec,
                   GetOwnedInState(d_.store, team, id, {SandboxState::kPaused, SandboxState::kSuspended}, "resume"));
  // Suspended, it held no node's resources: coming back counts against the team's quotas.
  if (rec.state == SandboxState::kSuspended) RETURN_IF_ERROR(store::AdmitSandbox(d_.store, team, rec.resources));
  d_.audit->Record(team, id, "lifecycle", "resume", {{"from", store::StateName(rec.state)}});
  if (rec.state == SandboxState::kSuspended) {
    return d_.ops->Submit(team, "resume", id, [this, id] { return RunResumeFromStore(id); });
  }
  return d_.ops->Submit(team, "resume", id, [this, id]() -> Status {
    ASSIGN_OR_RETURN(store::Sandbox rec, d_.store->GetSandbox(id));
    if (rec.state != SandboxState::kPaused) {
      return Conflict("sandbox " + id + " is " + std::string(store::StateName(rec.state)) + ", not paused");
    }
    RETURN_IF_ERROR(RuntimeOf(id)->Thaw(id));
    return SetState(id, SandboxState::kRunning);
  });
}

Result<store::OperationRecord> Lifecycle::Suspend(const std::string& team, const std::string& id) {
  RETURN_IF_ERROR(
      GetOwnedInState(d_.store, team, id, {SandboxState::kRunning, SandboxState::kPaused}, "suspend").status());
  d_.audit->Record(team, id, "lifecycle", "suspend");
  return d_.ops->Submit(team, "suspend", id, [this, id] { return RunSuspend(id); });
}

Status Lifecycle::RunSuspend(const std::string& id) {
  ASSIGN_OR_RETURN(store::Sandbox rec, d_.store->GetSandbox(id));
  if (rec.state != SandboxState::kRunning && rec.state != SandboxState::kPaused) {
    return Conflict("cannot suspend sandbox " + id + " while it is " + std::string(store::StateName(rec.state)));
  }
  const SandboxState before = rec.state;
  store::SnapshotRecord snap;
  snap.id = NewId("snap");
  snap.team = rec.team;
  snap.sandbox = id;
  snap.label = "suspend";
  snap.created_at_ms = WallNowMs();
  // Frozen from the snapshot on, so nothing written after it is lost when it stops. Marked
  // paused first so the snapshot neither freezes nor thaws it.
  runtime::Runtime* rt = RuntimeOf(id);
  RETURN_IF_ERROR(rt->Freeze(id));
  Status st = SetState(id, SandboxState::kPaused);
  if (st.ok()) st = d_.snapshots->TakeNow(id, &snap);
  if (st.ok()) st = SetState(id, SandboxState::kSuspending);
  if (st.ok()) st = d_.snapshots->Export(snap.id);
  if (!st.ok()) {
    // Not suspended: it goes on where it was, nothing lost.
    if (before == SandboxState::kRunning) (void)rt->Thaw(id);
    (void)SetState(id, before);
    return st.Annotate("suspend " + id);
  }
  Teardown(id);
  // A volume it wrote goes to the store, for whichever node resumes it. A failed sync leaves
  // the volume's newest copy here, recorded as this node's (it resumes here, not elsewhere).
  if (d_.volumes) {
    if (Status v = d_.volumes->Release(id, true, false); !v.ok())
      LogWarn("node", "suspend " + id + ": " + v.ToString());
  }
  RETURN_IF_ERROR(d_.pool->DestroyRoot(id));
  // The local copy goes too: the store is now the only home of the sandbox's files, which is
  // what lets it resume on any node reading the same store.
  RETURN_IF_ERROR(d_.pool->DeleteSnapshot(snap.id));
  ASSIGN_OR_RETURN(rec, d_.store->GetSandbox(id));
  rec.state = SandboxState::kSuspended;
  rec.uid_slot = -1;
  rec.head_snapshot = snap.id;
  return d_.store->PutSandbox(rec);
}

Status Lifecycle::RunResumeFromStore(const std::string& id) {
  // A suspended sandbox lives in the snapshot store, not on a node: in a fleet any node may
  // resume it, so the move to `resuming` is a compare-and-set that names this node, and of
  // two nodes asked at once exactly one wins.
  ASSIGN_OR_RETURN(bool claimed,
                   d_.store->ClaimSandbox(id, SandboxState::kSuspended, SandboxState::kResuming, d_.node_name));
  ASSIGN_OR_RETURN(store::Sandbox rec, d_.store->GetSandbox(id));
  if (!claimed)
    return Conflict("sandbox " + id + " is " + std::string(store::StateName(rec.state)) + ", not suspended");
  nlohmann::json steps = nlohmann::json::object();
  Status st = d_.snapshots->EnsureLocal(rec.head_snapshot);
  if (st.ok()) {
    st = d_.pool->CreateRootFromSnapshot(id, rec.head_snapshot, RootQuotaBytes(rec.runtime, rec.resources)).status();
  }
  if (st.ok()) st = Boot(&rec, &steps);
  if (!st.ok()) {
    Teardown(id);
    (void)d_.pool->DestroyRoot(id);
    (void)SetState(id, SandboxState::kSuspended);  // still resumable: the store holds it
    return st.Annotate("resume " + id);
  }
  rec.state = SandboxState::kRunning;
  rec.expires_at_ms = WallNowMs() + rec.timeout_s * 1000;
  if (auto live = d_.live->Find(id)) live->expires_at_ms = rec.expires_at_ms;
  return d_.store->PutSandbox(rec);
}

Result<std::vector<SandboxAndOp>> Lifecycle::Fork(const std::string& team, const std::string& id,
                                                  const std::string& snap_id, int count) {
  if (count < 1 || count > kMaxForks) {
    return InvalidArgument("count must be between 1 and " + std::to_string(kMaxForks));
  }
  ASSIGN_OR_RETURN(store::Sandbox parent, Get(team, id));
  // All the forks fit in the team's quotas, or none is made.
  RETURN_IF_ERROR(store::AdmitSandbox(d_.store, team, parent.resources, count));
  std::string from = snap_id;
  if (from.empty()) {
    ASSIGN_OR_RETURN(store::SnapshotRecord now, d_.snapshots->Take(team, id, "fork"));
    from = now.id;
  } else {
    RETURN_IF_ERROR(d_.snapshots->Get(team, from).status());
  }
  CreateRequest req;
  req.team = team;
  req.template_name = parent.template_name;
  req.from_snapshot = from;
  req.timeout_s = parent.timeout_s;
  req.on_timeout = parent.on_timeout;
  req.resources = parent.resources;
  req.env = parent.env;
  req.metadata = parent.metadata;
  // A fork keeps its parent's egress policy and the credentials it may hold (with placeholders
  // of its own); one scoped to the parent alone does not follow, nor does its variable.
  req.inherited_egress = parent.egress;
  ASSIGN_OR_RETURN(req.credentials, d_.credentials->InheritedBy(team, id, &req.env));
  std::vector<SandboxAndOp> out;
  for (int i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(auto created, Create(req));
    d_.audit->Record(team, id, "lifecycle", "fork", {{"snapshot", from}, {"child", created.first.id}});
    out.push_back(std::move(created));
  }
  return out;
}

Status Lifecycle::RunRollback(const std::string& id, const std::string& snap_id) {
  ASSIGN_OR_RETURN(store::Sandbox rec, d_.store->GetSandbox(id));
  if (rec.state != SandboxState::kRunning && rec.state != SandboxState::kPaused) {
    return Conflict("cannot roll back sandbox " + id + " while it is " + std::string(store::StateName(rec.state)));
  }
  // Its processes end: the ns runtime keeps files, not memory.
  RETURN_IF_ERROR(d_.snapshots->EnsureLocal(snap_id));
  Teardown(id);
  rec.uid_slot = -1;
  Status st = d_.pool->ReplaceRootFromSnapshot(id, snap_id, RootQuotaBytes(rec.runtime, rec.resources));
  nlohmann::json steps = nlohmann::json::object();
  if (st.ok()) st = Boot(&rec, &steps);
  if (!st.ok()) {
    Teardown(id);
    rec.state = SandboxState::kFailed;
    rec.error = "rollback to " + snap_id + " failed: " + st.message();
    (void)d_.store->PutSandbox(rec);
    return st;
  }
  rec.state = SandboxState::kRunning;
  rec.head_snapshot = snap_id;
  return d_.store->PutSandbox(rec);
}

Result<store::OperationRecord> Lifecycle::Rollback(const std::string& team, const std::string& id,
                                                   const std::string& snap_id) {
  RETURN_IF_ERROR(
      GetOwnedInState(d_.store, team, id, {SandboxState::kRunning, SandboxState::kPaused}, "roll back").status());
  RETURN_IF_ERROR(d_.snapshots->Get(team, snap_id).status());
  d_.audit->Record(team, id, "lifecycle", "rollback", {{"snapshot", snap_id}});
  return d_.ops->Submit(team, "rollback", id, [this, id, snap_id] { return RunRollback(id, snap_id); });
}

}  // namespace space::node
