// LocalBlobStore: a BlobStore in a host directory.
//
//   <root>/objects/<aa>/<sha256hex>     chunk objects
//   <root>/manifests/<snap_id>.json     manifests
//   tmp.<random> beside either kind     a Put in progress (or abandoned by a crash)
//
// Every path is resolved relative to the root's dirfd with O_NOFOLLOW, and keys are validated
// against the fixed layout, so a key never reaches outside the root. Put writes a temp file in
// the target's own directory, fsyncs it, renames it over the key and fsyncs the directory
// (and fsyncs objects/ when it creates an <aa> subdirectory), so a value is either wholly
// present and durable or absent. Owns the root dirfd; thread-safe (no mutable state).
#pragma once

#include <memory>
#include <string>

#include "common/unique_fd.h"
#include "snapshot/blob_store.h"

namespace space::snapshot {

class LocalBlobStore final : public BlobStore {
 public:
  // Opens (creating if needed, mode 0700) the store at `root`.
  static Result<std::unique_ptr<LocalBlobStore>> Open(const std::string& root);

  Status Put(const std::string& key, std::string_view bytes) override;
  Result<std::string> Get(const std::string& key, size_t max_bytes) override;
  Result<bool> Exists(const std::string& key) override;
  Status Delete(const std::string& key) override;
  Result<std::vector<std::string>> List(std::string_view prefix) override;
  Result<uint64_t> RemoveStaleTemp(int64_t older_than_ms) override;

  const std::string& root() const { return root_; }

 private:
  LocalBlobStore(std::string root, UniqueFd root_fd) : root_(std::move(root)), root_fd_(std::move(root_fd)) {}

  // Opens the directory holding `key` (objects/<aa> or manifests), creating <aa> if `create`.
  Result<UniqueFd> OpenKeyDir(const std::string& key, bool create);

  std::string root_;
  UniqueFd root_fd_;
};

}  // namespace space::snapshot
