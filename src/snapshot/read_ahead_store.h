// ReadAheadStore: a BlobStore over another that fetches the objects a restore will ask for,
// in the order it will ask, on `depth` threads ahead of it, so the restore's next chunks are on
// their way while it hashes, decompresses and writes the current one (one request at a time to
// a remote store leaves the link idle in between).
//
// At most `depth` objects are fetched ahead of the last one handed out (memory stays bounded
// at `depth` objects of at most `max_bytes`). A Get of a key fetched ahead returns its result,
// failure included, and forgets it; any other Get, and every other call, goes to the inner
// store as it is. Nothing fetched is trusted here either: the restore hashes what it gets.
// Thread-safe; the destructor waits for the fetches running.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "snapshot/blob_store.h"

namespace space::snapshot {

class ReadAheadStore final : public BlobStore {
 public:
  ReadAheadStore(BlobStore* inner, std::vector<std::string> keys, int depth, size_t max_bytes);
  ~ReadAheadStore() override;

  Status Put(const std::string& key, std::string_view bytes) override { return inner_->Put(key, bytes); }
  Result<std::string> Get(const std::string& key, size_t max_bytes) override;
  Result<bool> Exists(const std::string& key) override { return inner_->Exists(key); }
  Status Delete(const std::string& key) override { return inner_->Delete(key); }
  Result<std::vector<std::string>> List(std::string_view prefix) override { return inner_->List(prefix); }
  Result<uint64_t> RemoveStaleTemp(int64_t older_than_ms) override { return inner_->RemoveStaleTemp(older_than_ms); }

 private:
  void Worker();

  BlobStore* const inner_;
  const std::vector<std::string> keys_;
  const size_t depth_;
  const size_t max_bytes_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t next_ = 0;                                   // GUARDED_BY(mu_): index of the next key to fetch
  size_t handed_out_ = 0;                             // GUARDED_BY(mu_): fetched-ahead results taken
  std::unordered_set<std::string> fetching_;          // GUARDED_BY(mu_)
  std::map<std::string, Result<std::string>> ready_;  // GUARDED_BY(mu_)
  bool stopping_ = false;                             // GUARDED_BY(mu_)
  std::vector<std::thread> workers_;
};

// The object keys a restore of the manifest `m` fetches, in the order it fetches them (each
// once; the zero chunk, never fetched, left out).
struct Manifest;
std::vector<std::string> RestoreReadOrder(const Manifest& m);

}  // namespace space::snapshot
