// Volumes: named, team-owned data that outlives sandboxes (API.md "Volumes", docs/storage.md).
//
// A volume's bytes live in one node's pool as a btrfs subvolume with its own qgroup limit
// (volumes/<vol_id>); the store records which node holds the newest copy and, once synced,
// the snapshot-store manifest of that copy. An ns sandbox mounts it at create: a read-write
// mount is the volume itself, a read-only mount a read-only snapshot taken at boot (btrfs
// refuses writes to it whatever the sandbox does to its mounts). One read-write mount per
// volume, enforced by the store (a unique index), so across a fleet too.
//
// When its writer stops on a node (suspend; destroy too when the store is an object store),
// the volume is synced: a read-only snapshot is exported to the snapshot store (through the
// tree jail, like a sandbox snapshot) and the record names the new manifest and no node. A
// node that mounts a volume whose newest copy it lacks pulls it from the store; a volume
// whose newest copy is on another node and not synced cannot be mounted here (conflict).
//
// Owned by the Node; borrows what Deps names. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "node/audit_log.h"
#include "node/blob_locks.h"
#include "node/create_request.h"
#include "node/tree_jail.h"
#include "runtime/runtime.h"
#include "snapshot/blob_store.h"
#include "storage/pool.h"
#include "store/store.h"

namespace space::node {

inline constexpr int64_t kDefaultVolumeSizeMb = 1024;
inline constexpr int64_t kMaxVolumeSizeMb = 1 << 20;  // 1 TiB

// [a-z0-9][a-z0-9._-]{0,62}, like a template's name.
Status ValidateVolumeName(const std::string& name);
// A create's mounts: at most 8, names valid and distinct, paths valid (runtime::
// ValidateVolumePath), none at or below another's.
Status ValidateVolumeRequests(const std::vector<VolumeRequest>& requests);

// One of a sandbox's mounts as the API shows it.
struct VolumeMountView {
  std::string name;
  std::string path;
  bool read_only = false;
};

class Volumes {
 public:
  struct Deps {
    std::string node_name;
    store::Store* store = nullptr;
    storage::Pool* pool = nullptr;
    snapshot::BlobStore* blobs = nullptr;
    BlobLocks* locks = nullptr;
    AuditLog* audit = nullptr;
    TreeJailConfig tree_jail;
    // The snapshot store is shared by a fleet (an object store): a writer's destroy syncs the
    // volume too, so any node can mount it next.
    bool sync_on_destroy = false;
  };
  explicit Volumes(Deps deps) : d_(std::move(deps)) {}

  // For a team (the API).
  Result<store::VolumeRecord> Create(const std::string& team, const std::string& name, int64_t size_mb);
  Result<store::VolumeRecord> Get(const std::string& team, const std::string& name);
  Result<std::vector<store::VolumeRecord>> List(const std::string& team);
  // The live sandboxes' mounts of a volume.
  Result<std::vector<store::VolumeMountRecord>> Mounts(const store::VolumeRecord& v);
  // Conflict while any sandbox that is not destroyed mounts it.
  Status Delete(const std::string& team, const std::string& name);
  // A new volume `new_name` holding what `name` holds now (an O(1) btrfs snapshot on the node
  // that has its newest copy).
  Result<store::VolumeRecord> Fork(const std::string& team, const std::string& name, const std::string& new_name);

  // For the lifecycle. Records `sandbox`'s mounts (at create): not_found for a volume the team
  // lacks, conflict for a second read-write mount. On an error none is recorded.
  Status Attach(const std::string& team, const std::string& sandbox, const std::vector<VolumeRequest>& requests);
  // At every boot of `sandbox` on this node: the runtime's mount specs, with each volume's
  // newest copy made local (pulled from the store when needed) and read-only views taken.
  Result<std::vector<runtime::VolumeMountSpec>> Prepare(const std::string& sandbox);
  // The sandbox stopped on this node: its read-only views go, and a volume it wrote is synced
  // to the store when `sync`. With `forget` (destroyed, failed) its mounts are released too.
  Status Release(const std::string& sandbox, bool sync, bool forget);
  bool sync_on_destroy() const { return d_.sync_on_destroy; }
  // What `sandbox` mounts, by volume name.
  Result<std::vector<VolumeMountView>> OfSandbox(const std::string& sandbox);
  // At start, before sandboxes boot again: views and sync points left by a crash go, so do
  // local copies of volumes no longer recorded, and the mounts of sandboxes that ended.
  Status Reconcile();

 private:
  // Makes the pool hold `v`'s newest copy. `claim`: this node becomes its holder (a writer).
  Status EnsureLocal(store::VolumeRecord* v, bool claim);
  Status Pull(const store::VolumeRecord& v);
  Status Sync(store::VolumeRecord v);
  Status DropManifest(const std::string& manifest);
  // Deletes mount rows of sandboxes that are destroyed, failed or gone; true when any went.
  Result<bool> SweepEndedMounts(const std::string& volume);
  std::shared_ptr<std::mutex> LockFor(const std::string& volume_id);

  const Deps d_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<std::mutex>> locks_;  // GUARDED_BY(mu_): per volume
  std::map<std::string, std::string> synced_;  // GUARDED_BY(mu_): volume -> manifest its local copy equals
};

}  // namespace space::node
