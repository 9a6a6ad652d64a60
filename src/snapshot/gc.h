// Garbage collection for a BlobStore: deletes objects no manifest references, abandoned temp
// files, and (on request) a snapshot's manifest.
//
// Mark and sweep: every manifest is loaded and validated, their chunks form the live set,
// and every other object is deleted. If any manifest cannot be read or parsed the collection
// stops before deleting anything: an unreadable manifest may reference any object.
//
// Must not run concurrently with Export on the same store: an export Puts its objects before
// its manifest, so until it finishes they look unreferenced and would be collected. The caller
// serializes the two (e.g. one store-wide lock in the node agent). Stateless.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "snapshot/blob_store.h"

namespace space::snapshot {

struct GcOptions {
  // Temp files younger than this may belong to a Put in flight and are kept.
  int64_t temp_grace_ms = 60 * 60 * 1000;
};

struct GcStats {
  uint64_t manifests = 0;        // live snapshots
  uint64_t objects_live = 0;     // objects referenced and kept
  uint64_t objects_deleted = 0;  // unreferenced objects removed
  uint64_t temp_removed = 0;     // abandoned temp files removed
};

Result<GcStats> CollectGarbage(BlobStore& store, const GcOptions& options = {});

// Deletes snapshot `snap_id`'s manifest, making it unrestorable at once; its objects go at
// the next CollectGarbage unless another manifest references them. Children exported with
// it as parent stay restorable (manifests are self-contained). OK if already absent.
Status DeleteManifest(BlobStore& store, const std::string& snap_id);

}  // namespace space::snapshot
