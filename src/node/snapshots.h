// Snapshots: a sandbox's file (ns) or full (vm) snapshots, their export to the content-
// addressed snapshot store, restores from it, rolling snapshots, garbage collection and diffs.
// Taking one is O(1): freeze, read-only btrfs snapshot, thaw. Exports run in the background
// as operations; the manifest goes last, so a crash leaves nothing half-restorable.
//
// Owned by the Node; borrows what Deps names. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "node/audit_log.h"
#include "node/live_sandboxes.h"
#include "node/operations.h"
#include "node/runtimes.h"
#include "node/tree_jail.h"
#include "snapshot/local_blob_store.h"
#include "storage/diff.h"
#include "storage/pool.h"
#include "store/store.h"

namespace space::node {

class Snapshots {
 public:
  struct Deps {
    store::Store* store = nullptr;
    storage::Pool* pool = nullptr;
    snapshot::LocalBlobStore* blobs = nullptr;
    // The store's directory: exports and restores lock it shared, GC exclusive
    // (snapshot/store_lock.h), across every node sharing it.
    std::string blobs_dir;
    Operations* ops = nullptr;
    AuditLog* audit = nullptr;
    const Runtimes* runtimes = nullptr;
    TreeJailConfig tree_jail;  // snapshot trees hold files of other owners: walked there
  };
  explicit Snapshots(Deps deps) : d_(std::move(deps)) {}

  // For a team. Take: valid while the sandbox runs or is paused.
  Result<store::SnapshotRecord> Take(const std::string& team, const std::string& id, const std::string& label);
  Result<std::vector<store::SnapshotRecord>> List(const std::string& team, const std::string& id);
  Result<store::SnapshotRecord> Get(const std::string& team, const std::string& snap_id);
  // Children keep their parent link; the deleted snapshot's files go.
  Status Delete(const std::string& team, const std::string& snap_id);
  // Files added, changed and removed in `a` relative to `against`.
  Result<storage::TreeDiff> Diff(const std::string& team, const std::string& a, const std::string& against);

  // For the lifecycle, inside an operation on sandbox `id`: takes `snap` now and records it
  // as the sandbox's head.
  Status TakeNow(const std::string& id, store::SnapshotRecord* snap);
  void QueueExport(const std::string& team, const std::string& snap_id);
  Status Export(const std::string& snap_id);
  // Makes sure the pool holds `snap_id`, restoring it from the store when it does not.
  Status EnsureLocal(const std::string& snap_id);
  // After a crash: exports that did not finish run again; their orphaned objects go.
  Status Reconcile();
  // Takes the rolling snapshots that are due among `live` and thins the old ones.
  void Roll(int64_t now_ms, const std::vector<std::shared_ptr<LiveSandbox>>& live);

 private:
  Status CollectGarbage();
  // A full checkpoint of a vm sandbox: memory and device state beside its disk image, then
  // the pool's snapshot of both.
  Status CheckpointVm(const store::Sandbox& rec, const std::string& snap_id);

  const Deps d_;
};

}  // namespace space::node
