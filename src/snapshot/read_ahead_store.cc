#include "snapshot/read_ahead_store.h"

#include <algorithm>

#include "snapshot/chunk_codec.h"
#include "snapshot/manifest.h"

namespace space::snapshot {

ReadAheadStore::ReadAheadStore(BlobStore* inner, std::vector<std::string> keys, int depth, size_t max_bytes)
    : inner_(inner), keys_(std::move(keys)), depth_(static_cast<size_t>(std::max(1, depth))), max_bytes_(max_bytes) {
  for (size_t i = 0; i < depth_ && i < keys_.size(); ++i) workers_.emplace_back([this] { Worker(); });
}

ReadAheadStore::~ReadAheadStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ReadAheadStore::Worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || (next_ < keys_.size() && next_ < handed_out_ + depth_); });
    if (stopping_) return;
    const std::string key = keys_[next_++];
    if (fetching_.count(key) != 0 || ready_.count(key) != 0) continue;
    fetching_.insert(key);
    lock.unlock();
    Result<std::string> got = inner_->Get(key, max_bytes_);
    lock.lock();
    fetching_.erase(key);
    ready_.emplace(key, std::move(got));
    cv_.notify_all();
  }
}

Result<std::string> ReadAheadStore::Get(const std::string& key, size_t max_bytes) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return fetching_.count(key) == 0; });
    auto it = ready_.find(key);
    if (it != ready_.end()) {
      Result<std::string> got = std::move(it->second);
      ready_.erase(it);
      ++handed_out_;
      cv_.notify_all();  // room for one more ahead
      if (got.ok() && got->size() > max_bytes) {
        return PayloadTooLarge("get " + key + ": larger than " + std::to_string(max_bytes) + " bytes");
      }
      return got;
    }
    // The reader caught up with the fetchers: it takes the next key itself, so no fetcher
    // fetches it again behind it.
    if (next_ < keys_.size() && keys_[next_] == key) {
      ++next_;
      ++handed_out_;
      cv_.notify_all();
    }
  }
  return inner_->Get(key, max_bytes);
}

std::vector<std::string> RestoreReadOrder(const Manifest& m) {
  std::vector<std::string> keys;
  std::unordered_set<std::string> seen;
  for (const ManifestEntry& e : m.entries) {
    for (size_t i = 0; i < e.chunks.size(); ++i) {
      const std::string& hex = e.chunks[i];
      const bool whole = e.size - i * kChunkSize >= kChunkSize;
      if (whole && hex == ZeroChunkHex()) continue;  // a hole: the restore does not fetch it
      if (seen.insert(hex).second) keys.push_back(ObjectKey(hex));
    }
  }
  return keys;
}

}  // namespace space::snapshot
