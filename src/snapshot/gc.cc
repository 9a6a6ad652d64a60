#include "snapshot/gc.h"

#include <unordered_set>

#include "snapshot/manifest.h"

namespace space::snapshot {

Result<GcStats> CollectGarbage(BlobStore& store, const GcOptions& options) {
  GcStats stats;
  std::unordered_set<std::string> live;
  ASSIGN_OR_RETURN(std::vector<std::string> manifest_keys, store.List(kManifestsPrefix));
  for (const std::string& key : manifest_keys) {
    ASSIGN_OR_RETURN(std::string id, SnapIdFromManifestKey(key));
    Result<Manifest> m = LoadManifest(store, id);
    if (!m.ok()) return m.status().Annotate("gc: snapshot " + id + " (nothing deleted)");
    for (const ManifestEntry& e : m->entries) live.insert(e.chunks.begin(), e.chunks.end());
    ++stats.manifests;
  }
  ASSIGN_OR_RETURN(std::vector<std::string> object_keys, store.List(kObjectsPrefix));
  for (const std::string& key : object_keys) {
    ASSIGN_OR_RETURN(std::string hex, HashFromObjectKey(key));
    if (live.count(hex) != 0) {
      ++stats.objects_live;
      continue;
    }
    RETURN_IF_ERROR(store.Delete(key).Annotate("gc"));
    ++stats.objects_deleted;
  }
  ASSIGN_OR_RETURN(stats.temp_removed, store.RemoveStaleTemp(options.temp_grace_ms));
  return stats;
}

Status DeleteManifest(BlobStore& store, const std::string& snap_id) {
  RETURN_IF_ERROR(ValidateSnapId(snap_id));
  return store.Delete(ManifestKey(snap_id));
}

}  // namespace space::snapshot
