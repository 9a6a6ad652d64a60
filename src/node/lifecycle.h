// Lifecycle: a sandbox from create to destroy on this node. Create (cold: clone a root and
// boot; warm: hand out a pooled sandbox), boot, pause and resume, suspend to the snapshot
// store and resume from it, fork, rollback, timeouts, failure of a sandbox whose guest is gone,
// and reconciliation after a crash. State changes are recorded in the store before they are
// acted on where a crash could otherwise lose them; long work runs as operations, serialized
// per sandbox.
//
// Owned by the Node; borrows what Deps names. Every call taking (team, id) answers not_found
// for another team's sandbox. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "node/audit_log.h"
#include "node/create_request.h"
#include "node/credential_service.h"
#include "node/egress.h"
#include "node/live_sandboxes.h"
#include "node/operations.h"
#include "node/recipe.h"
#include "node/runtimes.h"
#include "node/snapshots.h"
#include "node/uid_slot_lease.h"
#include "node/volumes.h"
#include "node/warm_pools.h"
#include "storage/pool.h"
#include "store/store.h"

namespace space::node {

using SandboxAndOp = std::pair<store::Sandbox, store::OperationRecord>;

class Lifecycle {
 public:
  struct Deps {
    std::string node_name;
    std::string guest_binary;  // static spaced
    store::Store* store = nullptr;
    storage::Pool* pool = nullptr;
    const Runtimes* runtimes = nullptr;
    LiveSandboxes* live = nullptr;
    Operations* ops = nullptr;
    AuditLog* audit = nullptr;
    CredentialService* credentials = nullptr;
    Egress* egress = nullptr;  // null: egress is off on this node
    Snapshots* snapshots = nullptr;
    Volumes* volumes = nullptr;
    UidSlotLease* uid_slots = nullptr;
    PrivilegedActs* privileged = nullptr;  // nice values the node may not set itself
    // A fleet node: a template this pool lacks is pulled from the shared store, where the
    // node that built it published it (Snapshots::PullTemplate).
    bool pull_templates = false;
  };
  // `warm_pool`: template -> sandboxes to keep pre-created (empty: every create is cold).
  Lifecycle(Deps deps, const std::map<std::string, int>& warm_pool);

  Result<SandboxAndOp> Create(const CreateRequest& req);
  // The same, run to its end in the caller's thread (a template build, itself an operation,
  // must not wait on the queue it holds a worker of). The sandbox is running on success.
  Result<store::Sandbox> CreateNow(const CreateRequest& req);
  // Runs a template's start and ready commands in a sandbox just created from it; set once by
  // the Node before any create (it needs SandboxIo, which is built after the lifecycle).
  using TemplateStarter = std::function<Status(const store::Sandbox&, const TemplateConfig&, nlohmann::json* steps)>;
  void set_template_starter(TemplateStarter starter) { template_starter_ = std::move(starter); }
  Result<store::Sandbox> Get(const std::string& team, const std::string& id);
  Result<std::vector<store::Sandbox>> List(const store::SandboxFilter& filter);
  Result<store::OperationRecord> Destroy(const std::string& team, const std::string& id);
  // Valid while creating, running or paused.
  Result<store::Sandbox> SetTimeout(const std::string& team, const std::string& id, int64_t timeout_s);
  Result<store::OperationRecord> GetOperation(const std::string& team, const std::string& id);
  Result<store::OperationRecord> WaitOperation(const std::string& team, const std::string& id, int64_t timeout_ms);
  // running -> paused.
  Result<store::OperationRecord> Pause(const std::string& team, const std::string& id);
  // paused -> running, or suspended -> running (restored from the snapshot store).
  Result<store::OperationRecord> Resume(const std::string& team, const std::string& id);
  // running|paused -> suspended: snapshot, export, stop, free the node's resources.
  Result<store::OperationRecord> Suspend(const std::string& team, const std::string& id);
  // `count` new sandboxes from `snap_id` (empty: a snapshot taken now). Valid while running or
  // paused (the source), any time for an existing snapshot.
  Result<std::vector<SandboxAndOp>> Fork(const std::string& team, const std::string& id, const std::string& snap_id,
                                         int count);
  // The sandbox's files back to `snap_id` in place; its processes restart (ns keeps files, not
  // memory). Valid while running or paused; running afterwards.
  Result<store::OperationRecord> Rollback(const std::string& team, const std::string& id, const std::string& snap_id);

  // Once a tick: timeouts, and the failure of sandboxes whose guest is gone.
  void Tick(int64_t now_ms);
  // At start, after a crash or a clean stop: boots what should run, finishes or fails what was
  // in flight, removes what nobody owns.
  Status Reconcile();
  // Fleet: ends the live sandboxes whose record no longer puts them here (the fleet declared
  // this node lost while it ran). Returns how many.
  int EndDisowned();
  void StartWarmPools() { warm_.Start(); }
  void StopWarmPools() { warm_.Stop(); }
  WarmPools& warm_pools() { return warm_; }
  // The node stops: every live sandbox's channel closes and its runtime ends (the store keeps
  // them running; the next start boots them again).
  void ShutdownLive();

 private:
  Status RunCreate(store::Sandbox rec, CreateRequest req);
  // Create up to the point where the work is queued: validation, the record, the warm path.
  // Sets *served when a pooled sandbox served it.
  Result<store::Sandbox> PrepareCreate(CreateRequest* req, bool allow_warm, std::optional<SandboxAndOp>* served);
  // A fleet's template as the store records it (Snapshots::PullTemplate); the time a restore
  // took goes in the request, for timings.steps.pull_template.
  Result<storage::TemplateInfo> PullTemplate(CreateRequest* req);
  // Starts the runtime over an existing root; fills `steps`. With `pooled`, the booted
  // sandbox goes there instead of into the live table, and a failure leaves nothing running.
  Status Boot(store::Sandbox* rec, nlohmann::json* steps, std::shared_ptr<LiveSandbox>* pooled = nullptr);
  Status RunDestroy(const std::string& id, const std::string& reason);
  void Teardown(const std::string& id);
  void FailLostGuests();
  Status SetState(const std::string& id, store::SandboxState state);
  runtime::Runtime* RuntimeOf(const std::string& id);
  Status RunSuspend(const std::string& id);
  Status RunResumeFromStore(const std::string& id);
  Status RunRollback(const std::string& id, const std::string& snap_id);
  // The profiles named at create, as they are now: the new sandbox's `egress`.
  Result<nlohmann::json> ResolveEgress(const std::string& team, const std::vector<std::string>& names);

  // Warm pools (lifecycle_warm.cc).
  Result<std::shared_ptr<WarmSandbox>> MakeWarm(const std::string& template_name);
  void DestroyWarm(const std::shared_ptr<WarmSandbox>& warm);
  // Gives a pooled sandbox to `rec`: limits, disk, environment, timeouts, egress.
  Status HandOut(store::Sandbox* rec, const CreateRequest& req, const std::shared_ptr<WarmSandbox>& warm,
                 nlohmann::json* steps);
  // A create served from the pool, in the request thread: recorded running with its operation
  // already succeeded. nullopt when the hand-out failed (the pooled sandbox is gone, *warm is
  // reset) and the caller creates the same id cold. An error is a store failure after the
  // hand-out; the sandbox is torn down.
  Result<std::optional<SandboxAndOp>> CreateFromWarm(store::Sandbox* rec, const CreateRequest& req,
                                                     std::shared_ptr<WarmSandbox>* warm);

  const Deps d_;
  WarmPools warm_;
  TemplateStarter template_starter_;
};

}  // namespace space::node
