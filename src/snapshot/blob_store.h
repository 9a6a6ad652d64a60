// BlobStore: the flat key -> bytes store snapshots are exported to, and the key layout
// every implementation shares.
//
// Keys have exactly three shapes:
//   objects/<aa>/<sha256hex>   a zstd-compressed chunk; <aa> is the hash's first two hex digits
//   manifests/<snap_id>.json   a snapshot's manifest; its existence makes the snapshot restorable
//   templates/<name>.json      a template published to every node sharing the store: its name,
//                              team, digest and the manifest of its tree (node/snapshots.h)
// The layout is fixed so that a local directory and an S3-like bucket hold the same names and
// a store can be copied between them. Implementations reject any other key (InvalidArgument),
// so a key never names a path outside the store.
//
// Contract for implementations:
//   Put     durable and atomic: once it returns OK the whole value survives a crash, and a
//           reader never sees a partial value (local: temp file + fsync + rename + fsync dir;
//           S3: a single PUT or a completed multipart upload).
//   Get     returns the bytes as stored, verifying nothing: callers hash what they read,
//           because storage is untrusted. Fails with PayloadTooLarge beyond `max_bytes`,
//           NotFound when absent.
//   Delete  OK when the key is already absent (GC and retries are idempotent).
//   List    every key starting with `prefix` (one of "objects/", "manifests/", "templates/"),
//           any order.
//   RemoveStaleTemp  removes abandoned partial writes older than `older_than_ms` (local: tmp.*
//           files left by a crash mid-Put; S3: stale multipart uploads). Returns how many.
// Implementations must be safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/status.h"

namespace space::snapshot {

inline constexpr std::string_view kObjectsPrefix = "objects/";
inline constexpr std::string_view kManifestsPrefix = "manifests/";
inline constexpr std::string_view kTemplatesPrefix = "templates/";

class BlobStore {
 public:
  virtual ~BlobStore() = default;

  virtual Status Put(const std::string& key, std::string_view bytes) = 0;
  virtual Result<std::string> Get(const std::string& key, size_t max_bytes) = 0;
  virtual Result<bool> Exists(const std::string& key) = 0;
  virtual Status Delete(const std::string& key) = 0;
  virtual Result<std::vector<std::string>> List(std::string_view prefix) = 0;
  virtual Result<uint64_t> RemoveStaleTemp(int64_t older_than_ms) = 0;
};

// True for 64 lowercase hex digits (the form object hashes are stored and compared in).
bool IsSha256Hex(std::string_view s);

// Snapshot ids: 1-128 characters of [A-Za-z0-9._-], not starting with '.' or '-'
// (so an id is a single harmless file name and S3 key segment).
Status ValidateSnapId(std::string_view id);

// "objects/<aa>/<hex>"; `sha256_hex` must satisfy IsSha256Hex.
std::string ObjectKey(std::string_view sha256_hex);
// "manifests/<id>.json"; `snap_id` must satisfy ValidateSnapId.
std::string ManifestKey(std::string_view snap_id);

// "templates/<name>.json"; `name` must satisfy ValidateSnapId (template names are narrower).
std::string TemplateKey(std::string_view name);

// Checks `key` has one of the three shapes above.
Status ValidateKey(std::string_view key);
// The hash in an object key, or the id in a manifest key; InvalidArgument for other keys.
Result<std::string> HashFromObjectKey(std::string_view key);
Result<std::string> SnapIdFromManifestKey(std::string_view key);
Result<std::string> NameFromTemplateKey(std::string_view key);

}  // namespace space::snapshot
