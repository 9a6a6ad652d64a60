#include "snapshot/write_behind_store.h"

namespace space::snapshot {

WriteBehindStore::WriteBehindStore(BlobStore* inner, int uploads)
    : inner_(inner), max_queued_(static_cast<size_t>(std::max(1, uploads)) * 2) {
  for (int i = 0; i < std::max(1, uploads); ++i) workers_.emplace_back([this] { Worker(); });
}

WriteBehindStore::~WriteBehindStore() {
  (void)Drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void WriteBehindStore::Worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    auto [key, bytes] = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    cv_.notify_all();  // room in the queue
    lock.unlock();
    Status st = inner_->Put(key, bytes);
    lock.lock();
    --running_;
    pending_.erase(key);
    if (!st.ok() && first_error_.ok()) first_error_ = st;
    cv_.notify_all();
  }
}

Status WriteBehindStore::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
  Status st = first_error_;
  first_error_ = Status::Ok();
  return st;
}

Status WriteBehindStore::Put(const std::string& key, std::string_view bytes) {
  RETURN_IF_ERROR(ValidateKey(key));
  if (!HashFromObjectKey(key).ok()) {
    RETURN_IF_ERROR(Drain().Annotate("an object this store was still writing failed; " + key + " not written"));
    return inner_->Put(key, bytes);
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!first_error_.ok()) return first_error_;  // fail fast: the export is lost anyway
  cv_.wait(lock, [this] { return queue_.size() < max_queued_; });
  if (pending_.count(key) != 0) return Status::Ok();  // the same content is on its way
  pending_.insert(key);
  queue_.emplace_back(key, std::string(bytes));
  cv_.notify_all();
  return Status::Ok();
}

Result<bool> WriteBehindStore::Exists(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.count(key) != 0) return true;
  }
  if (HashFromObjectKey(key).ok()) return inner_->Exists(key);
  RETURN_IF_ERROR(Drain());
  return inner_->Exists(key);
}

Result<std::string> WriteBehindStore::Get(const std::string& key, size_t max_bytes) {
  RETURN_IF_ERROR(Drain());
  return inner_->Get(key, max_bytes);
}

Status WriteBehindStore::Delete(const std::string& key) {
  RETURN_IF_ERROR(Drain());
  return inner_->Delete(key);
}

Result<std::vector<std::string>> WriteBehindStore::List(std::string_view prefix) {
  RETURN_IF_ERROR(Drain());
  return inner_->List(prefix);
}

Result<uint64_t> WriteBehindStore::RemoveStaleTemp(int64_t older_than_ms) {
  RETURN_IF_ERROR(Drain());
  return inner_->RemoveStaleTemp(older_than_ms);
}

}  // namespace space::snapshot
