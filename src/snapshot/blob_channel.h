// A BlobStore across a stream socket: how an export or a restore that runs in the tree jail
// (node/tree_jail.h) reaches the node's store without any access to it. The jail's side is
// ChannelBlobStore; the node's is ServeBlobChannel, which treats every request as hostile and
// lets through only what its policy allows one export or one restore:
//   exists  any valid key (an export asks before each object; the answer is what content
//           addressing already tells anyone who can export a file);
//   get     the manifests the policy names (an export: its parent's; a restore: its own), and
//           the objects it names (a restore: those its manifest lists, nothing another
//           snapshot holds alone);
//   put     (an export only) an object only if it is one zstd frame of at most one chunk whose
//           content hashes to its key (so nothing can plant other content under a hash another
//           snapshot uses), and a manifest only under the export's own id, parsed and validated,
//           naming that id and that parent, every object it references present in the store;
//   other   refused.
// Frames, both ways: a 4-byte little-endian header length (at most 64 KiB), a JSON header, then
// `size` bytes of payload when the header says so (at most the largest object or manifest).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/result.h"
#include "snapshot/blob_store.h"

namespace space::snapshot {

// The jail's side: every call is one request and its reply on `fd` (not owned). Delete, List
// and RemoveStaleTemp are not an export's to make and fail here already.
class ChannelBlobStore : public BlobStore {
 public:
  explicit ChannelBlobStore(int fd) : fd_(fd) {}
  Status Put(const std::string& key, std::string_view bytes) override;
  Result<std::string> Get(const std::string& key, size_t max_bytes) override;
  Result<bool> Exists(const std::string& key) override;
  Status Delete(const std::string& key) override;
  Result<std::vector<std::string>> List(std::string_view prefix) override;
  Result<uint64_t> RemoveStaleTemp(int64_t older_than_ms) override;

 private:
  int fd_;
};

struct BlobChannelPolicy {
  std::string put_manifest;                     // an export's own id ("": no put at all)
  std::string parent_id;                        // what that manifest must name as its parent
  std::vector<std::string> get_manifests;       // snapshot ids whose manifests it may get
  std::unordered_set<std::string> get_objects;  // object hashes it may get
  int idle_timeout_ms = 10 * 60 * 1000;         // no request for this long: the channel is given up
};

// What one export of `snap_id` on `parent_id` ("" for a full one) may do.
BlobChannelPolicy ExportPolicy(const std::string& snap_id, const std::string& parent_id);
// What one restore of the snapshot `m` describes may do.
struct Manifest;
BlobChannelPolicy RestorePolicy(const Manifest& m);

struct BlobChannelStats {
  uint64_t objects_written = 0;  // objects this channel put (after verification)
  uint64_t bytes_written = 0;    // their stored bytes
  bool manifest_written = false;
};

// Answers requests on `fd` (not owned) against `store` until the other side closes it. An error
// means the channel broke or the other side asked for something the policy refuses; either way
// what it put before stays (objects are content-addressed, and only a complete manifest commits).
Result<BlobChannelStats> ServeBlobChannel(int fd, BlobStore& store, const BlobChannelPolicy& policy);

}  // namespace space::snapshot
