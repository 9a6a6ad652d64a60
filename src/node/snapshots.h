// Snapshots: a sandbox's file (ns) or full (vm) snapshots, their export to the content-
// addressed snapshot store, restores from it, rolling snapshots, garbage collection and diffs.
// Taking one is O(1): freeze, read-only btrfs snapshot, thaw. Exports run in the background
// as operations; the manifest goes last, so a crash leaves nothing half-restorable.
//
// Owned by the Node; borrows what Deps names. Thread-safe.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "node/audit_log.h"
#include "node/blob_locks.h"
#include "node/live_sandboxes.h"
#include "node/operations.h"
#include "node/runtimes.h"
#include "node/tree_jail.h"
#include "snapshot/local_blob_store.h"
#include "storage/diff.h"
#include "storage/pool.h"
#include "store/store.h"

namespace space::node {

// Chunk objects one export has on their way to the store at once (snapshot/write_behind_store.h).
inline constexpr int kExportUploads = 4;

class Snapshots {
 public:
  struct Deps {
    store::Store* store = nullptr;
    storage::Pool* pool = nullptr;
    snapshot::BlobStore* blobs = nullptr;
    // Exports and restores hold it shared, GC exclusive, across every node sharing the store.
    BlobLocks* locks = nullptr;
    Operations* ops = nullptr;
    AuditLog* audit = nullptr;
    const Runtimes* runtimes = nullptr;
    TreeJailConfig tree_jail;  // snapshot trees hold files of other owners: walked there
    // Published template records are MACed with it (HMAC-SHA256) and refused without a valid
    // MAC: whoever can write the store cannot name a template. Empty: records are not MACed.
    std::string template_record_key;
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

  // Templates on every node sharing the store (snapshots_templates.cc). Publish exports
  // template `t`'s tree (read in the tree jail) and records {name, team, digest, manifest}
  // under templates/<name>.json; a no-op when the record names that digest already. Pull
  // brings template `name` from the store into this pool: the tree is restored in the tree
  // jail, digested by the pool, and named only when that digest is the recorded one.
  // not_found when no node published it; the local template when it is the recorded one.
  Status PublishTemplate(const storage::TemplateInfo& t);
  // `restored` (optional) says whether the tree had to come from the store.
  Result<storage::TemplateInfo> PullTemplate(const std::string& name, bool* restored = nullptr);
  // Removes the record: no node pulls `name` any more (those holding it keep their copy).
  Status WithdrawTemplate(const std::string& name);
  // Takes the rolling snapshots that are due among `live` and thins the old ones.
  void Roll(int64_t now_ms, const std::vector<std::shared_ptr<LiveSandbox>>& live);

 private:
  Status CollectGarbage();
  // A full checkpoint of a vm sandbox: memory and device state beside its disk image, then
  // the pool's snapshot of both.
  Status CheckpointVm(const store::Sandbox& rec, const std::string& snap_id);

  const Deps d_;
  // Restores of pulled templates run one at a time: two creates of one missing template
  // restore it once.
  std::mutex pull_mu_;
};

}  // namespace space::node
