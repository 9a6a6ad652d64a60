// WriteBehindStore: a BlobStore over another whose chunk-object Puts return at once and run on
// `uploads` threads, so an export hashes and compresses the next chunk while the last ones are
// on the wire to a remote store (one S3 request at a time leaves the link idle between them).
//
// It weakens Put's contract for objects only, and keeps the commit rule whole:
//   - Put of an object queues a copy (at most `uploads` * 2 waiting, so memory stays bounded:
//     a caller blocks while the queue is full) and returns OK; its failure surfaces later.
//   - Put of a manifest or template first waits for every queued object and fails, writing
//     nothing, if any of them failed: a manifest is never stored before the objects it names.
//   - Exists of a queued or uploaded object is true (the export that asks will not commit
//     unless it lands); everything else, and Get, Delete, List and RemoveStaleTemp, first
//     waits for the queue.
// One per export: a failure is reported to the next commit through this store, so two exports
// sharing one could see each other's. Thread-safe; the destructor waits for the queue.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "snapshot/blob_store.h"

namespace space::snapshot {

class WriteBehindStore final : public BlobStore {
 public:
  WriteBehindStore(BlobStore* inner, int uploads);
  ~WriteBehindStore() override;

  Status Put(const std::string& key, std::string_view bytes) override;
  Result<std::string> Get(const std::string& key, size_t max_bytes) override;
  Result<bool> Exists(const std::string& key) override;
  Status Delete(const std::string& key) override;
  Result<std::vector<std::string>> List(std::string_view prefix) override;
  Result<uint64_t> RemoveStaleTemp(int64_t older_than_ms) override;

  // Waits for every queued object; the first failure since the last Drain, if any.
  Status Drain();

 private:
  void Worker();

  BlobStore* const inner_;
  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::string, std::string>> queue_;  // GUARDED_BY(mu_)
  std::unordered_set<std::string> pending_;                // GUARDED_BY(mu_): queued or uploading
  size_t running_ = 0;                                     // GUARDED_BY(mu_)
  Status first_error_;                                     // GUARDED_BY(mu_)
  bool stopping_ = false;                                  // GUARDED_BY(mu_)
  std::vector<std::thread> workers_;
};

}  // namespace space::snapshot
